// One app: its revisions (immutable), any two compared side by side, publish or roll back
// (publishing an older revision) with the app's version, and a new revision.
import { Badge, Loading, Section, when } from '../components/bits.js';
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, qs, tenantPath } from '../lib/api.js';
import { html, useState } from '../lib/html.js';
import { useAction, useLoad } from '../lib/load.js';
import { canWrite } from '../lib/session.js';
import { RevisionDiff } from './revision-diff.js';
import { NewRevision } from './revision-form.js';

async function loadApp(tenantId, appId) {
  const at = (...more) => tenantPath(tenantId, 'apps', appId, ...more);
  const [app, revisions, profiles] = await Promise.all([
    call('GET', at()),
    call('GET', `${at('revisions')}${qs({ limit: 200 })}`),
    call('GET', `${tenantPath(tenantId, 'model-profiles')}${qs({ limit: 200 })}`),
  ]);
  return { app, revisions: revisions.items, profiles: profiles.items };
}

function Compare({ revisions, published }) {
  const newest = revisions[0]?.revision;
  const other = published && published !== newest ? published : revisions[1]?.revision;
  const form = useForm({ left: String(other ?? newest), right: String(newest) });
  const byNo = (n) => revisions.find((r) => r.revision === Number(n));
  const left = byNo(form.values.left);
  const right = byNo(form.values.right);
  const options = revisions.map((r) => [
    String(r.revision),
    `revision ${r.revision}${r.revision === published ? ' (published)' : ''}`,
  ]);
  return html`<div>
    <div class="inline">
      <${Field} form=${form} name="left" label="Left" as="select" options=${options} />
      <${Field} form=${form} name="right" label="Right" as="select" options=${options} />
    </div>
    ${left && right && html`<${RevisionDiff} left=${left} right=${right} />`}
  </div>`;
}

export function AppDetail({ session, tenantId, appId }) {
  const data = useLoad(() => loadApp(tenantId, appId), [tenantId, appId]);
  const action = useAction();
  const [showForm, setShowForm] = useState(false);
  if (data.error) return html`<${ErrorBox} error=${data.error} />`;
  if (!data.data) return html`<${Loading} />`;
  const { app, revisions, profiles } = data.data;
  const writable = canWrite(session);
  const publish = async (revision) => {
    const body = { revision, expected_version: app.version };
    if (await action.run(() => call('POST', tenantPath(tenantId, 'apps', appId, 'publish'), body)))
      data.reload();
  };
  const label = (r) =>
    app.published_revision && r < app.published_revision ? `Roll back to ${r}` : `Publish ${r}`;
  return html`<div class="grid">
    <${Section} title=${`${app.display_name} (${app.app_key})`}>
      <p>
        <${Badge} status=${app.status} /> published revision <strong data-testid="published-revision">${app.published_revision ?? 'none'}</strong>
        · version ${app.version} · <span class="muted">${app.app_id}</span>
      </p>
      <${ErrorBox} error=${action.error} onReload=${() => {
        action.setError(null);
        data.reload();
      }} />
      <table class="list" data-testid="revisions">
        <thead><tr><th>Revision</th><th>Digest</th><th>Created</th><th>By</th><th></th></tr></thead>
        <tbody>
          ${revisions.map(
            (r) => html`<tr>
              <td>${r.revision} ${r.revision === app.published_revision && html`<${Badge} status="published" />`}</td>
              <td><code>${r.content_digest.slice(0, 12)}</code></td>
              <td>${when(r.created_at)}</td><td>${r.created_by}</td>
              <td>${
                writable &&
                r.revision !== app.published_revision &&
                html`<button type="button" data-mutation disabled=${action.busy} onClick=${() => publish(r.revision)}>${label(r.revision)}</button>`
              }</td>
            </tr>`,
          )}
        </tbody>
      </table>
      ${writable && !showForm && html`<button type="button" data-mutation onClick=${() => setShowForm(true)}>New revision</button>`}
      ${
        writable &&
        showForm &&
        html`<${NewRevision} tenantId=${tenantId} appId=${appId} base=${revisions[0]} profiles=${profiles}
          onCreated=${() => {
            setShowForm(false);
            data.reload();
          }} />`
      }
    </${Section}>
    ${revisions.length > 0 && html`<${Section} title="Compare revisions"><${Compare} key=${revisions[0].revision} revisions=${revisions} published=${app.published_revision} /></${Section}>`}
  </div>`;
}
