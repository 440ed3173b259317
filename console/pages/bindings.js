// A tenant's channel bindings: status and its transitions, the webhook URL (shown once, at
// creation: only the route key's digest is stored), write-only secret rotation, a new binding,
// and the chat preview of console bindings.
import { Badge, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { useAction, useLoad } from '../lib/load.js';
import { tenantHref } from '../lib/route.js';
import { optional, REASON } from '../lib/rules.js';
import { canWrite } from '../lib/session.js';
import { CreateBinding } from './binding-create.js';
import { RotateSecret } from './binding-secret.js';

const NEXT = {
  draft: ['active', 'disabled'],
  active: ['suspended', 'disabled'],
  suspended: ['active', 'disabled'],
  disabled: [],
};
const VERB = { active: 'Activate', suspended: 'Suspend', disabled: 'Disable' };

async function loadAll(tenantId) {
  const get = (p) => call('GET', `${tenantPath(tenantId, p)}${qs({ limit: 200 })}`).then((r) => r.items);
  const [bindings, apps, secrets] = await Promise.all([get('bindings'), get('apps'), get('secrets')]);
  return { bindings, apps, secrets };
}

function Transition({ tenantId, binding, onDone }) {
  const form = useForm({ reason: '' }, { reason: optional(REASON) });
  const action = useAction();
  const move = async (next) => {
    if (!form.validate()) return;
    const body = { expected_version: binding.version, next_status: next };
    if (form.values.reason.trim()) body.reason = form.values.reason.trim();
    const path = tenantPath(tenantId, 'bindings', binding.binding_id, 'status-transitions');
    if (await action.run(() => call('POST', path, body))) onDone();
  };
  const options = NEXT[binding.status] ?? [];
  if (options.length === 0) return null;
  return html`<div class="inline">
    <${Field} form=${form} name="reason" label="Reason (optional)" />
    ${options.map(
      (
        n,
      ) => html`<button type="button" data-mutation class=${n === 'disabled' ? 'danger' : ''} disabled=${action.busy}
        onClick=${() => move(n)}>${VERB[n]}</button>`,
    )}
    <${ErrorBox} error=${action.error} onReload=${onDone} />
  </div>`;
}

export function Bindings({ session, tenantId }) {
  const data = useLoad(() => loadAll(tenantId), [tenantId]);
  const [created, setCreated] = useState(null);
  const writable = canWrite(session);
  if (data.error) return html`<${ErrorBox} error=${data.error} />`;
  const { bindings = [], apps = [], secrets = [] } = data.data ?? {};
  const appName = (id) => apps.find((a) => a.app_id === id)?.display_name ?? id;
  return html`<div class="grid">
    ${
      created &&
      html`<div class="once card" data-testid="new-binding">
        <p>Binding <code>${created.binding_id}</code> created (${created.status}).</p>
        ${
          created.channel === 'console'
            ? html`<p><a href=${tenantHref(tenantId, `/chat/${created.binding_id}`)}>Open its chat preview</a></p>`
            : html`<p>Webhook URL to paste into ${created.channel === 'telegram' ? 'Telegram (setWebhook)' : 'WeCom (API receive URL)'} — shown once:</p>
              <code data-testid="webhook-url">${location.origin}${created.webhook_path}</code>`
        }
      </div>`
    }
    <${Section} title="Bindings">
      <div class="bindings" data-testid="bindings">
        ${bindings.map(
          (b) => html`<article class="binding" data-binding=${b.binding_id}>
            <h3>${b.channel} · ${b.provider_account_id ?? ''} <${Badge} status=${b.status} /></h3>
            <p class="muted">${b.binding_id} · app ${appName(b.app_id)} · version ${b.version} · updated ${when(b.updated_at)}</p>
            ${b.channel === 'console' && html`<p><a href=${tenantHref(tenantId, `/chat/${b.binding_id}`)}>Chat preview</a></p>`}
            ${b.channel !== 'console' && html`<p class="muted">Webhook: <code>${location.origin}/v1/webhooks/${b.channel}/…</code> (the route key was shown once, at creation)</p>`}
            ${writable && html`<${Transition} tenantId=${tenantId} binding=${b} onDone=${data.reload} />`}
            ${writable && b.secret_ref && html`<${RotateSecret} tenantId=${tenantId} binding=${b} secrets=${secrets} />`}
          </article>`,
        )}
        ${bindings.length === 0 && !data.loading && html`<p class="muted">No bindings yet.</p>`}
      </div>
    </${Section}>
    ${
      writable &&
      html`<${Section} title="New binding">
        <${CreateBinding} tenantId=${tenantId} apps=${apps} onCreated=${(b) => {
          setCreated(b);
          data.reload();
        }} />
      </${Section}>`
    }
  </div>`;
}
