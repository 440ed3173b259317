// Sign-in with the platform token (printed by `npm start`) or a tenant API key and its tenant id.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { text } from '../lib/rules.js';
import { signIn, TENANT_KEY } from '../lib/whoami.js';

export function SignIn({ notice, onSignedIn }) {
  const form = useForm(
    { token: '', tenant_id: '' },
    { token: text('token', { min: 1, max: 512, trim: true }) },
  );
  const action = useAction();
  const tenantKey = TENANT_KEY.test(form.values.token.trim());
  const submit = async (e) => {
    e.preventDefault();
    if (
      !form.validate(
        tenantKey && !form.values.tenant_id.trim() ? { tenant_id: 'the key’s tenant id is required' } : {},
      )
    )
      return;
    const session = await action.run(() => signIn(form.values.token, form.values.tenant_id));
    if (session) onSignedIn(session);
  };
  return html`<div class="signin card">
    <h1>Switchyard console</h1>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    <form onSubmit=${submit}>
      <${Field} form=${form} name="token" label="Platform token or tenant API key" type="password"
        autocomplete="off" hint="npm start prints where the platform token is. It is kept in this tab only." />
      ${
        tenantKey &&
        html`<${Field} form=${form} name="tenant_id" label="Tenant id (t_…)" hint="A tenant key acts inside its own tenant only." />`
      }
      <button type="submit" disabled=${action.busy}>Sign in</button>
    </form>
    <${ErrorBox} error=${action.error} />
  </div>`;
}
