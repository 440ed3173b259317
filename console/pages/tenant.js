// A tenant's overview: its configuration (platform: edit with its version), status transitions
// with a reason (platform), and its API keys (admins mint and revoke them; a key is shown once).
import { Json, Section } from '../components/bits.js';
import { html } from '../lib/html.js';
import { canWrite, isPlatform } from '../lib/session.js';
import { ApiKeys } from './api-keys.js';
import { TenantConfiguration, TenantStatus } from './tenant-forms.js';

export function TenantOverview({ session, tenant, reloadTenant }) {
  const platform = isPlatform(session);
  return html`<div class="grid">
    <${Section} title=${`Configuration (version ${tenant.version})`}>
      ${
        platform
          ? html`<${TenantConfiguration} key=${tenant.version} tenant=${tenant} onSaved=${reloadTenant} />`
          : html`<${Json} value=${tenant} />`
      }
    </${Section}>
    ${
      platform &&
      html`<${Section} title="Status">
        <${TenantStatus} key=${tenant.version} tenant=${tenant} onSaved=${reloadTenant} />
      </${Section}>`
    }
    <${Section} title="API keys">
      <${ApiKeys} tenantId=${tenant.tenant_id} writable=${canWrite(session)} />
    </${Section}>
  </div>`;
}
