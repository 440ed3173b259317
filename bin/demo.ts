// npm run demo: against a running `npm start`, creates a demo tenant and a Telegram binding whose
// Bot API is a local Telegram-compatible sandbox (tests/fakes/telegram.ts on 127.0.0.1), sends one
// signed update to the webhook, waits for the reply at the sandbox, and prints it with the
// workflow's Temporal UI link. Everything goes through the public admin API and webhook.
import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadEnvOrExit } from '../runtime/entry';
import { startFakeTelegram } from '../tests/fakes/telegram';

const env = loadEnvOrExit();
const base = process.env.SWITCHYARD_API_URL ?? `http://127.0.0.1:${env.PORT}`;
const tokenFile = join(resolve(env.SWITCHYARD_DATA_DIR), 'admin-token');
const adminToken =
  env.SWITCHYARD_ADMIN_TOKEN ?? (existsSync(tokenFile) ? readFileSync(tokenFile, 'utf8').trim() : '');
if (!adminToken)
  fail(`no admin token: set SWITCHYARD_ADMIN_TOKEN or run npm start first (it writes ${tokenFile})`);

async function call(method: string, path: string, body?: unknown, token = adminToken) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: API answers are read field by field and printed
  const json = (await res.json().catch(() => ({}))) as Record<string, any>;
  if (res.status >= 300) fail(`${method} ${path} → ${res.status} ${JSON.stringify(json.error ?? json)}`);
  return json;
}

function fail(message: string): never {
  console.error(`demo: ${message}`);
  process.exit(1);
}

await fetch(`${base}/healthz`).catch(() =>
  fail(`Switchyard is not answering at ${base}; start it with npm start`),
);

const sandbox = await startFakeTelegram();
try {
  const botId = String(randomInt(100_000_000, 999_999_999));
  const botToken = `${botId}:DEMO${randomBytes(16).toString('hex')}`;
  const webhookSecret = randomBytes(24).toString('hex');
  sandbox.addBot(botToken);

  const tenant = await call('POST', '/v1/admin/tenants', {
    tenant_key: `demo-${randomBytes(3).toString('hex')}`,
    display_name: 'Demo tenant',
  });
  const t = `/v1/admin/tenants/${tenant.tenant_id}`;
  const secret = await call('POST', `${t}/secrets`, {
    name: 'telegram-bot',
    purpose: 'telegram_bot',
    value: { bot_token: botToken, webhook_secret_token: webhookSecret },
  });
  const model = await call('POST', `${t}/model-profiles`, {
    profile_key: 'scripted',
    provider: 'scripted',
    model: 'rules',
  });
  const backend = await call('POST', `${t}/backend-profiles`, { profile_key: 'main', provider: 'postgres' });
  const app = await call('POST', `${t}/apps`, { app_key: 'assistant', display_name: 'Demo assistant' });
  const rev = await call('POST', `${t}/apps/${app.app_id}/revisions`, {
    model_profile_id: model.model_profile_id,
    system_prompt: 'You are a friendly demo assistant.',
    scripted: {
      rules: [{ match: '^(hello|hi)\\b', flags: 'i', reply: 'Hello! Switchyard received: "{{text}}"' }],
      default_reply: 'Switchyard received: "{{text}}"',
    },
  });
  await call('POST', `${t}/apps/${app.app_id}/publish`, {
    revision: rev.revision,
    expected_version: app.version,
  });
  await call('PUT', `${t}/configuration`, {
    expected_version: tenant.version,
    display_name: tenant.display_name,
    rate_limit_rpm: null,
    max_concurrent_executions: null,
    monthly_token_budget: null,
    monthly_spend_limit_minor: null,
    billing_currency: null,
    audit_retention_days: tenant.audit_retention_days,
    log_masking_level: tenant.log_masking_level,
    trace_sampling_rate: tenant.trace_sampling_rate,
    default_agent_app_id: app.app_id,
    default_backend_profile_id: backend.profile_id,
  });
  const binding = await call('POST', `${t}/bindings`, {
    channel: 'telegram',
    provider_account_id: botId,
    app_id: app.app_id,
    secret_ref: secret.secret_ref,
    config: { api_base_url: sandbox.url },
    activate: true,
  });
  console.log(`tenant ${tenant.tenant_id}, binding ${binding.binding_id} → webhook ${binding.webhook_path}`);

  const chatId = randomInt(1_000_000, 9_999_999);
  const update = {
    update_id: randomInt(1, 1_000_000),
    message: {
      message_id: 1,
      date: Math.floor(Date.now() / 1000),
      chat: { id: chatId, type: 'private' },
      from: { id: chatId, is_bot: false, first_name: 'Demo' },
      text: 'Hello from the Switchyard demo',
    },
  };
  const started = Date.now();
  const res = await fetch(`${base}${binding.webhook_path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': webhookSecret },
    body: JSON.stringify(update),
  });
  console.log(`webhook answered ${res.status} in ${Date.now() - started} ms`);
  if (res.status !== 200) fail(`webhook refused the update: ${await res.text()}`);

  await sandbox.waitForSent(1, 60_000).catch(() => fail('no reply within 60 s (is the worker running?)'));
  const reply = sandbox.sent[0]!;
  // The reply is out; the message turns `replied` right after the worker records the receipt.
  let message: Record<string, string> | undefined;
  for (let i = 0; i < 50; i++) {
    message = (await call('GET', `${t}/messages?limit=1`)).items[0];
    if (message?.status === 'replied' || message?.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log('');
  console.log(`reply to chat ${reply.chatId}: ${reply.text}`);
  console.log(`message ${message?.event_id}: ${message?.status}`);
  console.log(`Temporal UI: ${message?.temporal_ui_url}`);
} finally {
  await sandbox.close();
}
