// npm run demo: against a running `npm start`, creates a demo tenant with a scripted app and a
// `console` binding (the built-in channel with no provider), sends one message through the console
// endpoint as the platform, polls the conversation until the reply is there, and prints it with the
// message's timeline and its workflow's Temporal UI link. Everything goes through the public admin
// API; nothing outside the process is called, so no credentials or sandbox are needed.
// `npm run demo -- --photo [file]` sends a picture with the message (a small generated PNG when no
// file is named): it is stored as an artifact, the agent is told about it, and the artifact's row
// (kind, size, digest) is printed with the reply.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { sniffImage } from '../channels/media';
import { loadEnvOrExit } from '../runtime/entry';
import { demoPng } from './demo-photo';

const env = loadEnvOrExit();
const args = process.argv.slice(2);
const photoAt = args.indexOf('--photo');
const photoArg =
  photoAt >= 0 && args[photoAt + 1] && !args[photoAt + 1]!.startsWith('--') ? args[photoAt + 1] : null;
const photo = photoAt < 0 ? null : photoArg ? readPhoto(photoArg) : { name: 'demo.png', bytes: demoPng() };
const photoType = photo
  ? (sniffImage(photo.bytes) ?? fail(`${photoArg} is not a JPEG, PNG, GIF or WebP picture`))
  : null;

function readPhoto(path: string): { name: string; bytes: Buffer } {
  if (!existsSync(path)) fail(`no such file: ${path}`);
  return { name: basename(path), bytes: readFileSync(path) };
}
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

const tenant = await call('POST', '/v1/admin/tenants', {
  tenant_key: `demo-${randomBytes(3).toString('hex')}`,
  display_name: 'Demo tenant',
});
const t = `/v1/admin/tenants/${tenant.tenant_id}`;
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
    rules: [
      // A media message's text is its caption, then one line per attachment: `[image attached: …]`.
      {
        match: '\\[image attached: ([^\\]]+)\\]',
        reply: 'Nice picture! I received your photo ({{1}}).',
      },
      { match: '^(hello|hi)\\b', flags: 'i', reply: 'Hello! Switchyard received: "{{text}}"' },
    ],
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
  channel: 'console',
  app_id: app.app_id,
  activate: true,
});
const messages = `${t}/bindings/${binding.binding_id}/console/messages`;
console.log(`tenant ${tenant.tenant_id}, console binding ${binding.binding_id}`);

const conversation = 'demo';
const text = photo ? 'Here is a photo from the Switchyard demo' : 'Hello from the Switchyard demo';
const started = Date.now();
const sent = await call('POST', messages, {
  conversation_id: conversation,
  text,
  client_message_id: 'demo-1',
  ...(photo
    ? {
        attachments: [
          { content_type: photoType, file_name: photo.name, data_base64: photo.bytes.toString('base64') },
        ],
      }
    : {}),
});
console.log(
  `console send answered 202 in ${Date.now() - started} ms: event ${sent.event_id} (${sent.status})`,
);

// Poll the conversation as the console does (`after` = the last cursor; the console polls about
// once a second, the demo faster) until the message is finished, then read what is left.
// biome-ignore lint/suspicious/noExplicitAny: API answers are read field by field and printed
const items: Record<string, any>[] = [];
let cursor: string | undefined;
const poll = async () => {
  const query = `?conversation_id=${conversation}${cursor ? `&after=${cursor}` : ''}`;
  const page = await call('GET', `${messages}${query}`);
  items.push(...page.items);
  cursor = page.next_cursor ?? cursor;
};
// biome-ignore lint/suspicious/noExplicitAny: API answers are read field by field and printed
let message: Record<string, any> = {};
const deadline = Date.now() + 60_000;
while (Date.now() < deadline) {
  await poll();
  message = await call('GET', `${t}/messages/${sent.event_id}`);
  if (message.status === 'replied' || message.status === 'failed') break;
  await new Promise((r) => setTimeout(r, 250));
}
if (message.status !== 'replied' && message.status !== 'failed')
  fail('no reply within 60 s (is the worker running?)');
await poll();

console.log('');
// A user message comes again each time its status changed: print each item once, where it came first.
const latest = new Map(items.map((i) => [`${i.kind}:${i.event_id}:${i.segment_index}`, i]));
for (const item of latest.values()) {
  const attached = (item.attachments ?? []).map(
    (a: Record<string, unknown>) =>
      ` [${a.file_name ?? 'attachment'}, ${a.content_type}, ${a.size_bytes} bytes]`,
  );
  console.log(`${item.kind === 'user' ? 'you  ' : 'reply'} ${item.text}${attached.join('')}`);
}
console.log(`message ${sent.event_id}: ${message.status} in ${Date.now() - started} ms`);
for (const a of message.artifacts ?? []) {
  console.log(
    `artifact ${a.artifact_id}: ${a.direction} ${a.kind} ${a.content_type}, ${a.size_bytes} bytes, ` +
      `sha256 ${a.content_digest}, ${a.storage} ${a.content_ref}`,
  );
}

const timeline = await call('GET', `${t}/messages/${sent.event_id}/timeline`);
const t0 = Date.parse(timeline.entries[0]?.at ?? new Date().toISOString());
console.log('');
console.log('timeline:');
for (const e of timeline.entries) {
  console.log(`  +${String(Date.parse(e.at) - t0).padStart(5)} ms  ${e.kind} ${e.state}`);
}
console.log(`Temporal UI: ${timeline.temporal_ui_url ?? '(not configured: SWITCHYARD_TEMPORAL_UI_URL)'}`);
