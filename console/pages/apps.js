// A tenant's apps (and the model profiles their revisions use): list and create.
import { Badge, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useAction, usePaged } from '../lib/load.js';
import { go, tenantHref } from '../lib/route.js';
import { slug, text } from '../lib/rules.js';
import { canWrite } from '../lib/session.js';

function CreateApp({ tenantId }) {
  const form = useForm(
    { app_key: '', display_name: '' },
    { app_key: slug('app_key'), display_name: text('display_name', { min: 1, max: 200, trim: true }) },
  );
  const action = useAction();
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const app = await action.run(() =>
      call('POST', tenantPath(tenantId, 'apps'), {
        app_key: form.values.app_key.trim(),
        display_name: form.values.display_name.trim(),
      }),
    );
    if (app) go(tenantHref(tenantId, `/apps/${app.app_id}`));
  };
  return html`<form class="inline" onSubmit=${submit} data-testid="create-app">
    <${Field} form=${form} name="app_key" label="App key" />
    <${Field} form=${form} name="display_name" label="Display name" />
    <button type="submit" data-mutation disabled=${action.busy}>Create app</button>
    <${ErrorBox} error=${action.error} />
  </form>`;
}

function CreateScriptedProfile({ tenantId, onCreated }) {
  const form = useForm({ profile_key: 'scripted' }, { profile_key: slug('profile_key') });
  const action = useAction();
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const body = { profile_key: form.values.profile_key.trim(), provider: 'scripted', model: 'rules' };
    if (await action.run(() => call('POST', tenantPath(tenantId, 'model-profiles'), body))) onCreated();
  };
  return html`<form class="inline" onSubmit=${submit}>
    <${Field} form=${form} name="profile_key" label="Profile key" />
    <button type="submit" data-mutation disabled=${action.busy}>Add scripted model profile</button>
    <${ErrorBox} error=${action.error} />
  </form>`;
}

export function Apps({ session, tenantId }) {
  const apps = usePaged(
    (cursor) => call('GET', `${tenantPath(tenantId, 'apps')}${qs({ limit: 50, cursor })}`),
    [tenantId],
  );
  const profiles = usePaged(
    (cursor) => call('GET', `${tenantPath(tenantId, 'model-profiles')}${qs({ limit: 50, cursor })}`),
    [tenantId],
  );
  const writable = canWrite(session);
  return html`<div class="grid">
    <${Section} title="Apps">
      <${ErrorBox} error=${apps.error} />
      ${writable && html`<${CreateApp} tenantId=${tenantId} />`}
      <table class="list" data-testid="apps">
        <thead><tr><th>App</th><th>Key</th><th>Status</th><th>Published revision</th><th>Updated</th></tr></thead>
        <tbody>
          ${apps.items.map(
            (a) => html`<tr>
              <td><a href=${tenantHref(tenantId, `/apps/${a.app_id}`)}>${a.display_name}</a></td>
              <td>${a.app_key}</td><td><${Badge} status=${a.status} /></td>
              <td>${a.published_revision ?? '–'}</td><td>${when(a.updated_at)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
      ${apps.more && html`<button type="button" class="link" onClick=${apps.loadMore}>Load more</button>`}
    </${Section}>
    <${Section} title="Model profiles">
      <${ErrorBox} error=${profiles.error} />
      ${writable && html`<${CreateScriptedProfile} tenantId=${tenantId} onCreated=${profiles.reload} />`}
      <table class="list">
        <thead><tr><th>Profile</th><th>Provider</th><th>Model</th><th>Version</th></tr></thead>
        <tbody>
          ${profiles.items.map(
            (p) => html`<tr><td>${p.profile_key}<br /><small class="muted">${p.model_profile_id}</small></td>
              <td>${p.provider}</td><td>${p.model}</td><td>${p.version}</td></tr>`,
          )}
        </tbody>
      </table>
    </${Section}>
  </div>`;
}
