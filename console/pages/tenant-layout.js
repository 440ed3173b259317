// One tenant's pages under a common header. The tenant is read first: a tenant key addressing
// another tenant gets the API's 404 and sees nothing but that error.

import { Badge, Loading } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { call, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useLoad } from '../lib/load.js';
import { tenantHref } from '../lib/route.js';
import { AppDetail } from './app-detail.js';
import { Apps } from './apps.js';
import { Audit } from './audit.js';
import { Bindings } from './bindings.js';
import { Chat } from './chat.js';
import { DeadLetters } from './dead-letters.js';
import { MessageLife } from './message-life.js';
import { Messages } from './messages.js';
import { TenantOverview } from './tenant.js';
import { Usage } from './usage.js';

const TABS = [
  ['', 'Overview'],
  ['/apps', 'Apps'],
  ['/bindings', 'Bindings'],
  ['/messages', 'Messages'],
  ['/dead-letters', 'Dead letters & tools'],
  ['/audit', 'Audit'],
  ['/usage', 'Usage'],
];

function pageOf(rest, props) {
  const [section, id] = rest;
  switch (section) {
    case undefined:
      return html`<${TenantOverview} ...${props} />`;
    case 'apps':
      return id ? html`<${AppDetail} ...${props} appId=${id} />` : html`<${Apps} ...${props} />`;
    case 'bindings':
      return html`<${Bindings} ...${props} />`;
    case 'chat':
      return id ? html`<${Chat} ...${props} bindingId=${id} />` : html`<p>No such page.</p>`;
    case 'messages':
      return id ? html`<${MessageLife} ...${props} eventId=${id} />` : html`<${Messages} ...${props} />`;
    case 'dead-letters':
      return html`<${DeadLetters} ...${props} />`;
    case 'audit':
      return html`<${Audit} ...${props} />`;
    case 'usage':
      return html`<${Usage} ...${props} />`;
    default:
      return html`<p>No such page.</p>`;
  }
}

export function TenantLayout({ session, tenantId, rest, query }) {
  const tenant = useLoad(() => call('GET', tenantPath(tenantId)), [tenantId, session.token]);
  if (tenant.error) return html`<${ErrorBox} error=${tenant.error} />`;
  if (!tenant.data) return html`<${Loading} />`;
  const t = tenant.data;
  const current = rest[0] ? `/${rest[0]}` : '';
  const props = { session, tenantId, tenant: t, reloadTenant: tenant.reload, query };
  return html`<div>
    <div class="tenant-head">
      <h1>${t.display_name} <${Badge} status=${t.status} /></h1>
      <span class="muted">${t.tenant_id} · ${t.tenant_key} · version ${t.version}</span>
    </div>
    <nav class="tabs">
      ${TABS.map(
        ([href, label]) =>
          html`<a href=${tenantHref(tenantId, href)} class=${current === href || (href === '/bindings' && current === '/chat') ? 'active' : ''}>${label}</a>`,
      )}
    </nav>
    ${pageOf(rest, props)}
  </div>`;
}
