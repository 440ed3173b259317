// Platform only: every tenant, a new one, and the one-click demo agent for a first run.
import { Badge, Loading, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs } from '../lib/api.js';
import { createDemoAgent } from '../lib/demo.js';
import { html, useState } from '../lib/html.js';
import { useAction, usePaged } from '../lib/load.js';
import { go, tenantHref } from '../lib/route.js';
import { slug, TENANT_RULES } from '../lib/rules.js';

function DemoAgent({ prominent }) {
  const action = useAction();
  const [step, setStep] = useState(null);
  const create = async () => {
    const made = await action.run(() => createDemoAgent(setStep));
    if (made) go(tenantHref(made.tenantId, `/chat/${made.bindingId}`));
  };
  return html`<div class=${prominent ? 'demo card prominent' : 'demo'}>
    ${prominent && html`<h2>No tenants yet</h2><p>Create a demo tenant with a scripted agent and a console binding, then chat with it here.</p>`}
    <button type="button" data-mutation onClick=${create} disabled=${action.busy}>Create a demo agent</button>
    ${action.busy && step && html`<span class="muted"> creating ${step}…</span>`}
    <${ErrorBox} error=${action.error} />
  </div>`;
}

function CreateTenant({ onCreated }) {
  const form = useForm(
    { tenant_key: '', display_name: '' },
    { tenant_key: slug('tenant_key'), display_name: TENANT_RULES.display_name },
  );
  const action = useAction();
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const t = await action.run(() =>
      call('POST', '/v1/admin/tenants', {
        tenant_key: form.values.tenant_key.trim().toLowerCase(),
        display_name: form.values.display_name.trim(),
      }),
    );
    if (t) onCreated(t);
  };
  return html`<form class="inline" onSubmit=${submit}>
    <${Field} form=${form} name="tenant_key" label="Tenant key" hint="a-z, 0-9, '-'" />
    <${Field} form=${form} name="display_name" label="Display name" />
    <button type="submit" data-mutation disabled=${action.busy}>Create tenant</button>
    <${ErrorBox} error=${action.error} />
  </form>`;
}

export function Tenants() {
  const list = usePaged((cursor) => call('GET', `/v1/admin/tenants${qs({ limit: 50, cursor })}`), []);
  if (list.loading && list.items.length === 0) return html`<${Loading} />`;
  return html`<div>
    <h1>Tenants</h1>
    <${ErrorBox} error=${list.error} />
    ${!list.error && list.items.length === 0 && html`<${DemoAgent} prominent=${true} />`}
    <${Section} title="New tenant">
      <${CreateTenant} onCreated=${(t) => go(tenantHref(t.tenant_id))} />
      ${list.items.length > 0 && html`<${DemoAgent} prominent=${false} />`}
    </${Section}>
    ${
      list.items.length > 0 &&
      html`<table class="list" data-testid="tenants">
        <thead><tr><th>Tenant</th><th>Key</th><th>Status</th><th>Version</th><th>Created</th></tr></thead>
        <tbody>
          ${list.items.map(
            (t) => html`<tr>
              <td><a href=${tenantHref(t.tenant_id)}>${t.display_name}</a><br /><small class="muted">${t.tenant_id}</small></td>
              <td>${t.tenant_key}</td>
              <td><${Badge} status=${t.status} /></td>
              <td>${t.version}</td>
              <td>${when(t.created_at)}</td>
            </tr>`,
          )}
        </tbody>
      </table>`
    }
    ${list.more && html`<button type="button" class="link" onClick=${list.loadMore}>Load more</button>`}
  </div>`;
}
