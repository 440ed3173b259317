// Rotating a binding's channel secret: write-only (the value is never read back or shown).
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { text } from '../lib/rules.js';

/** The secret's JSON shape per channel (README "Channel secrets"). */
export const SECRET_FIELDS = {
  telegram: ['bot_token', 'webhook_secret_token'],
  wecom: ['corp_secret', 'token', 'encoding_aes_key'],
};

export function RotateSecret({ tenantId, binding, secrets }) {
  const fields = SECRET_FIELDS[binding.channel] ?? [];
  const rules = Object.fromEntries(fields.map((f) => [f, text(f, { min: 1, max: 4096 })]));
  const form = useForm(Object.fromEntries(fields.map((f) => [f, ''])), rules);
  const action = useAction();
  const [done, setDone] = useState(null);
  const secret = secrets.find((s) => s.secret_ref === binding.secret_ref);
  if (!secret || fields.length === 0) return null;
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const value = Object.fromEntries(fields.map((f) => [f, form.values[f].trim()]));
    const r = await action.run(() => call('PUT', tenantPath(tenantId, 'secrets', secret.name), { value }));
    if (r) {
      setDone(r.version);
      form.reset();
    }
  };
  return html`<details class="rotate">
    <summary>Rotate secret <code>${secret.name}</code> (version ${done ?? secret.version})</summary>
    <form onSubmit=${submit}>
      ${fields.map((f) => html`<${Field} form=${form} name=${f} type="password" autocomplete="off" />`)}
      <button type="submit" data-mutation disabled=${action.busy}>Rotate</button>
      ${done && html`<span class="ok"> rotated to version ${done}</span>`}
      <${ErrorBox} error=${action.error} />
    </form>
  </details>`;
}
