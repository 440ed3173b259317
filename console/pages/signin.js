// Sign-in with the platform token (printed by `npm start`) or a tenant API key: the API says who
// it is (GET /v1/admin/whoami), a tenant key's tenant included.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { text } from '../lib/rules.js';
import { signIn } from '../lib/whoami.js';

export function SignIn({ notice, onSignedIn }) {
  const form = useForm({ token: '' }, { token: text('token', { min: 1, max: 512, trim: true }) });
  const action = useAction();
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const session = await action.run(() => signIn(form.values.token));
    if (session) onSignedIn(session);
  };
  return html`<div class="signin card">
    <h1>Switchyard console</h1>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    <form onSubmit=${submit}>
      <${Field} form=${form} name="token" label="Platform token or tenant API key" type="password"
        autocomplete="off" hint="npm start prints where the platform token is. It is kept in this tab only." />
      <button type="submit" disabled=${action.busy}>Sign in</button>
    </form>
    <${ErrorBox} error=${action.error} />
  </div>`;
}
