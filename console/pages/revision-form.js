// A new immutable revision, starting from the newest one's content; checked with the API's limits.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { REVISION_RULES, text } from '../lib/rules.js';

const DEFAULT_SCRIPTED = { rules: [], default_reply: 'You said: {{text}}' };
const pretty = (v) => (v === null || v === undefined ? '' : JSON.stringify(v, null, 2));

export function NewRevision({ tenantId, appId, base, profiles, onCreated }) {
  const limits = base?.limits ?? {};
  const form = useForm(
    {
      model_profile_id: base?.model_profile_id ?? profiles[0]?.model_profile_id ?? '',
      system_prompt: base?.system_prompt ?? 'You are a helpful assistant.',
      scripted: pretty(base ? base.scripted : DEFAULT_SCRIPTED),
      tools: pretty(base?.tools ?? []),
      max_steps: String(limits.max_steps ?? ''),
      max_tokens: String(limits.max_tokens ?? ''),
      deadline_s: String(limits.deadline_s ?? ''),
    },
    { ...REVISION_RULES, model_profile_id: text('model_profile_id', { min: 1, max: 200 }) },
  );
  const action = useAction();
  const v = form.values;
  const submit = async (e) => {
    e.preventDefault();
    if (!form.validate()) return;
    const lim = {};
    for (const k of ['max_steps', 'max_tokens', 'deadline_s']) if (v[k].trim() !== '') lim[k] = Number(v[k]);
    const body = {
      model_profile_id: v.model_profile_id,
      system_prompt: v.system_prompt,
      ...(v.tools.trim() ? { tools: JSON.parse(v.tools) } : {}),
      ...(v.scripted.trim() ? { scripted: JSON.parse(v.scripted) } : {}),
      ...(Object.keys(lim).length ? { limits: lim } : {}),
    };
    if (await action.run(() => call('POST', tenantPath(tenantId, 'apps', appId, 'revisions'), body)))
      onCreated();
  };
  const options = profiles.map((p) => [p.model_profile_id, `${p.profile_key} (${p.provider})`]);
  return html`<form onSubmit=${submit} data-testid="new-revision">
    ${
      options.length > 0
        ? html`<${Field} form=${form} name="model_profile_id" label="Model profile" as="select" options=${options} />`
        : html`<p class="warn">No model profile yet: add one on the Apps page.</p>`
    }
    <${Field} form=${form} name="system_prompt" label="System prompt" as="textarea" rows="3" />
    <${Field} form=${form} name="scripted" label="Scripted agent (JSON: rules, default_reply)" as="textarea" rows="6" />
    <${Field} form=${form} name="tools" label="Tools (JSON array, at most 64)" as="textarea" rows="4" />
    <div class="inline">
      <${Field} form=${form} name="max_steps" hint="1-100" />
      <${Field} form=${form} name="max_tokens" hint="1-10,000,000" />
      <${Field} form=${form} name="deadline_s" hint="1-86,400 s" />
    </div>
    <button type="submit" data-mutation disabled=${action.busy}>Create revision</button>
    <${ErrorBox} error=${action.error} />
  </form>`;
}
