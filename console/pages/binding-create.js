// A new binding. Console: an app is all it needs (no secret). Telegram and WeCom: the channel
// credentials become a new write-only secret of the channel's purpose first.
import { ErrorBox } from '../components/error-box.js';
import { Field, useForm } from '../components/form.js';
import { call, tenantPath } from '../lib/api.js';
import { createConsoleBinding } from '../lib/demo.js';
import { html } from '../lib/html.js';
import { useAction } from '../lib/load.js';
import { CORP_ID, int, optional, pattern, TELEGRAM_BOT_ID, text, url } from '../lib/rules.js';
import { SECRET_FIELDS } from './binding-secret.js';

const required = (f) => text(f, { min: 1, max: 4096, trim: true });
const RULES = {
  console: {},
  telegram: {
    provider_account_id: pattern(
      'bot id',
      TELEGRAM_BOT_ID,
      "for telegram, provider_account_id is the bot's numeric id",
    ),
    bot_token: required('bot_token'),
    webhook_secret_token: required('webhook_secret_token'),
    api_base_url: optional(url('api_base_url')),
  },
  wecom: {
    corp_id: pattern('corp_id', CORP_ID, 'corp_id must be 1-64 characters of A-Z, a-z, 0-9, _ and -'),
    agent_id: int('agent_id', { min: 0 }),
    corp_secret: required('corp_secret'),
    token: required('token'),
    encoding_aes_key: required('encoding_aes_key'),
    api_base_url: optional(url('api_base_url')),
  },
};

async function create(tenantId, v) {
  if (v.channel === 'console') return createConsoleBinding(tenantId, v.app_id);
  const fields = SECRET_FIELDS[v.channel];
  const telegram = v.channel === 'telegram';
  const account = telegram ? v.provider_account_id.trim() : `${v.corp_id.trim()}/${Number(v.agent_id)}`;
  const name = `${v.channel}-${account.toLowerCase().replace(/[^a-z0-9_-]/g, '-')}`.slice(0, 64);
  const secret = await call('POST', tenantPath(tenantId, 'secrets'), {
    name,
    purpose: telegram ? 'telegram_bot' : 'wecom_app',
    value: Object.fromEntries(fields.map((f) => [f, v[f].trim()])),
  });
  const config = {
    ...(telegram ? {} : { corp_id: v.corp_id.trim(), agent_id: Number(v.agent_id) }),
    ...(v.api_base_url.trim() ? { api_base_url: v.api_base_url.trim() } : {}),
  };
  return call('POST', tenantPath(tenantId, 'bindings'), {
    channel: v.channel,
    provider_account_id: account,
    app_id: v.app_id,
    secret_ref: secret.secret_ref,
    ...(Object.keys(config).length ? { config } : {}),
    activate: !!v.activate,
  });
}

export function CreateBinding({ tenantId, apps, onCreated }) {
  const blank = { channel: 'console', app_id: apps[0]?.app_id ?? '', activate: true, api_base_url: '' };
  for (const f of [
    'provider_account_id',
    'bot_token',
    'webhook_secret_token',
    'corp_id',
    'agent_id',
    'corp_secret',
    'token',
    'encoding_aes_key',
  ])
    blank[f] = '';
  const form = useForm(blank);
  const action = useAction();
  const v = form.values;
  const app = v.app_id || apps[0]?.app_id || '';
  const submit = async (e) => {
    e.preventDefault();
    const rules = RULES[v.channel];
    const extra = { app_id: app ? null : 'choose an app' };
    const errors = Object.fromEntries(
      Object.entries(rules).map(([f, rule]) => [f, rule(String(v[f] ?? ''))]),
    );
    if (!form.validate({ ...errors, ...extra })) return;
    const b = await action.run(() => create(tenantId, { ...v, app_id: app }));
    if (b) onCreated(b);
  };
  if (apps.length === 0) return html`<p class="muted">Create an app first.</p>`;
  const secretInputs = (SECRET_FIELDS[v.channel] ?? []).map(
    (f) => html`<${Field} form=${form} name=${f} type="password" autocomplete="off" />`,
  );
  return html`<form onSubmit=${submit} data-testid="create-binding">
    <div class="inline">
      <${Field} form=${form} name="channel" label="Channel" as="select" options=${['console', 'telegram', 'wecom']} />
      <${Field} form=${form} name="app_id" label="App" as="select" options=${apps.map((a) => [a.app_id, a.display_name])} />
    </div>
    ${v.channel === 'telegram' && html`<${Field} form=${form} name="provider_account_id" label="Bot id (numeric)" />`}
    ${
      v.channel === 'wecom' &&
      html`<div class="inline"><${Field} form=${form} name="corp_id" /><${Field} form=${form} name="agent_id" /></div>`
    }
    ${secretInputs.length > 0 && html`<div class="inline">${secretInputs}</div>`}
    ${
      v.channel !== 'console' &&
      html`<${Field} form=${form} name="api_base_url" label="API base URL (optional)" hint="default: the provider's public API" />
        <${Field} form=${form} name="activate" label="Activate now (proves ownership with the provider)" type="checkbox" />`
    }
    <button type="submit" data-mutation disabled=${action.busy}>Create binding</button>
    <${ErrorBox} error=${action.error} />
  </form>`;
}
