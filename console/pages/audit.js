// The tenant's audit log (newest first, filter by action) and its hash-chain verification.
import { Json, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { useAction, usePaged } from '../lib/load.js';

function Verification({ tenantId }) {
  const action = useAction();
  const [result, setResult] = useState(null);
  const verify = async () => {
    const r = await action.run(() => call('GET', tenantPath(tenantId, 'audit-events', 'verification')));
    if (r) setResult(r);
  };
  return html`<div class="inline" data-testid="verification">
    <button type="button" onClick=${verify} disabled=${action.busy}>Verify chain</button>
    ${
      result &&
      (result.valid
        ? html`<span class="ok" data-valid="true">Chain valid: ${result.checked} entries checked.</span>`
        : html`<span class="warn" data-valid="false">Chain broken at ${result.first_invalid} (${result.checked} checked).</span>`)
    }
    <${ErrorBox} error=${action.error} />
  </div>`;
}

export function Audit({ tenantId }) {
  const form = useForm({ action: '' });
  const [filter, setFilter] = useState('');
  const list = usePaged(
    (cursor) =>
      call('GET', `${tenantPath(tenantId, 'audit-events')}${qs({ limit: 50, cursor, action: filter })}`),
    [tenantId, filter],
  );
  const apply = (e) => {
    e.preventDefault();
    setFilter(form.values.action.trim());
  };
  return html`<${Section} title="Audit log">
    <${Verification} tenantId=${tenantId} />
    <form class="inline filters" onSubmit=${apply}>
      <${Field} form=${form} name="action" label="Action" hint="e.g. binding.create" />
      <button type="submit">Apply filters</button>
    </form>
    <${ErrorBox} error=${list.error} />
    <table class="list" data-testid="audit">
      <thead><tr><th>#</th><th>When</th><th>Actor</th><th>Action</th><th>Reason</th><th>Versions</th><th>Digest</th></tr></thead>
      <tbody>
        ${list.items.map(
          (a) => html`<tr>
            <td>${a.seq}</td><td>${when(a.occurred_at)}</td><td>${a.actor_type}<br /><small class="muted">${a.actor_id}</small></td>
            <td>${a.action}<details><summary>details</summary><${Json} value=${a.details} /></details></td>
            <td>${a.reason ?? ''}</td>
            <td>${a.before_version ?? ''}${a.after_version !== null ? ` → ${a.after_version}` : ''}</td>
            <td><code title=${a.digest}>${a.digest.slice(0, 10)}</code></td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${list.more && html`<button type="button" class="link" onClick=${list.loadMore}>Load more</button>`}
  </${Section}>`;
}
