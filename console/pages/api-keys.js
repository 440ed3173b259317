// A tenant's API keys: list, mint (the key is shown once, then only its digest exists), revoke.
import { Badge, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { useAction, usePaged } from '../lib/load.js';

export function ApiKeys({ tenantId, writable }) {
  const list = usePaged(
    (cursor) => call('GET', `${tenantPath(tenantId, 'api-keys')}${qs({ limit: 50, cursor })}`),
    [tenantId],
  );
  const form = useForm({ role: 'tenant_viewer' });
  const action = useAction();
  const [minted, setMinted] = useState(null);
  const mint = async (e) => {
    e.preventDefault();
    const k = await action.run(() =>
      call('POST', tenantPath(tenantId, 'api-keys'), { role: form.values.role }),
    );
    if (k) {
      setMinted(k);
      list.reload();
    }
  };
  const revoke = async (keyId) => {
    if (await action.run(() => call('POST', tenantPath(tenantId, 'api-keys', keyId, 'revoke'), {})))
      list.reload();
  };
  return html`<div>
    <${ErrorBox} error=${list.error} />
    ${
      writable &&
      html`<form class="inline" onSubmit=${mint}>
        <${Field} form=${form} name="role" label="Role" as="select" options=${['tenant_viewer', 'tenant_admin']} />
        <button type="submit" data-mutation disabled=${action.busy}>Mint key</button>
      </form>`
    }
    ${
      minted &&
      html`<div class="once" data-testid="minted-key">
        <p>New ${minted.role} key (shown once; copy it now):</p>
        <code>${minted.key}</code>
        <p class="muted">Sign in with it and tenant id <code>${tenantId}</code>.</p>
      </div>`
    }
    <${ErrorBox} error=${action.error} />
    <table class="list">
      <thead><tr><th>Key</th><th>Role</th><th>Status</th><th>Created</th><th></th></tr></thead>
      <tbody>
        ${list.items.map(
          (k) => html`<tr>
            <td><code>${k.key_id}</code></td><td>${k.role}</td><td><${Badge} status=${k.status} /></td>
            <td>${when(k.created_at)}</td>
            <td>${writable && k.status === 'active' && html`<button type="button" data-mutation class="danger" onClick=${() => revoke(k.key_id)}>Revoke</button>`}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${list.more && html`<button type="button" class="link" onClick=${list.loadMore}>Load more</button>`}
  </div>`;
}
