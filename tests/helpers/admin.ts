import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import { expect } from 'vitest';
import { newId } from '../../db/ids';
import { contentDigest, sha256Hex } from '../../lib/digest';
import { type FakeTelegram, fakeTelegramAt, startFakeTelegram } from '../fakes/telegram';
import { TEST_ADMIN_TOKEN } from './harness';

// Admin-API test helpers: everything a tenant needs is created THROUGH the API (as an operator
// would), so these helpers double as a happy-path test of the routes they use.

// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field in tests
export type Json = any;

export interface ApiResponse {
  status: number;
  body: Json;
  text: string;
}

/** Anything with Hono's `request` (the harness app or a test's own newApp). */
export interface RequestApp {
  request(path: string, init?: RequestInit): Response | Promise<Response>;
}

let seq = 0;
/** A tenant/app/profile key that is unique across test files and runs. */
export const uniqueKey = (prefix: string) =>
  `${prefix}-${process.pid}-${Date.now().toString(36)}-${(seq++).toString(36)}-${randomBytes(2).toString('hex')}`;

export async function api(
  app: RequestApp,
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown; rawBody?: string } = {},
): Promise<ApiResponse> {
  const token = opts.token === undefined ? TEST_ADMIN_TOKEN : opts.token;
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (opts.body !== undefined || opts.rawBody !== undefined) headers['content-type'] = 'application/json';
  const res = await app.request(path, {
    method,
    headers,
    body: opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await res.text();
  let body: Json = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  return { status: res.status, body, text };
}

/** Asserts the status (showing the body on failure) and returns the body. */
export async function ok(p: Promise<ApiResponse>, status = 200): Promise<Json> {
  const res = await p;
  expect(res.status, res.text).toBe(status);
  return res.body;
}

export const tenantPath = (tenantId: string, rest = '') => `/v1/admin/tenants/${tenantId}${rest}`;

export interface TelegramBot {
  botId: string;
  botToken: string;
  webhookSecret: string;
}

export function newTelegramBot(): TelegramBot {
  const botId = String(1_000_000 + Math.floor(Math.random() * 8e9));
  return {
    botId,
    botToken: `${botId}:AA${randomBytes(16).toString('base64url')}`,
    webhookSecret: randomBytes(16).toString('hex'),
  };
}

let sharedTelegram: Promise<FakeTelegram> | undefined;

/**
 * One fake Telegram per test process for the bindings of tests that bring none: activation asks
 * getMe of the binding's api_base_url, so every active binding needs a Bot API that knows its
 * token. It lives as long as the test process (each file runs in its own fork).
 */
export function sharedFakeTelegram(): Promise<FakeTelegram> {
  sharedTelegram ??= startFakeTelegram();
  return sharedTelegram;
}

/** The full configuration snapshot the PUT requires, from a tenant as returned by the API. */
export function configurationOf(t: Json, overrides: Record<string, unknown> = {}) {
  return {
    expected_version: t.version,
    display_name: t.display_name,
    rate_limit_rpm: t.rate_limit_rpm,
    max_concurrent_executions: t.max_concurrent_executions,
    monthly_token_budget: t.monthly_token_budget,
    monthly_spend_limit_minor: t.monthly_spend_limit_minor,
    billing_currency: t.billing_currency,
    audit_retention_days: t.audit_retention_days,
    log_masking_level: t.log_masking_level,
    trace_sampling_rate: t.trace_sampling_rate,
    default_agent_app_id: t.default_agent_app_id,
    default_backend_profile_id: t.default_backend_profile_id,
    ...overrides,
  };
}

export async function createTenant(app: RequestApp, body: Record<string, unknown> = {}): Promise<Json> {
  return ok(
    api(app, 'POST', '/v1/admin/tenants', {
      body: { tenant_key: uniqueKey('t'), display_name: 'Test tenant', ...body },
    }),
    201,
  );
}

export interface AdminTenant {
  tenantId: string;
  tenantKey: string;
  adminKey: string;
  adminKeyId: string;
  viewerKey: string;
  viewerKeyId: string;
  secretRef: string;
  secretName: string;
  bot: TelegramBot;
  /** the Bot API of the tenant's binding (its api_base_url) */
  telegram: FakeTelegram;
  modelProfileId: string;
  backendProfileId: string;
  appId: string;
  revision: number;
  bindingId: string;
  routeKey: string;
  webhookPath: string;
}

export const SCRIPTED = { rules: [], default_reply: 'You said: {{text}}' };

/**
 * One fully configured tenant, built through the API: platform creates it and mints an admin
 * and a viewer key; the tenant admin creates a Telegram secret, a scripted model profile, a
 * backend profile, an app with a published revision and an active binding; the platform then
 * sets the defaults with the configuration PUT. The binding's Bot API is `telegram`, or the fake
 * of this process at `apiBaseUrl`, or else the process's shared fake; it learns the bot's token
 * before the activation asks getMe.
 */
export async function setupTenant(
  app: RequestApp,
  opts: { telegram?: FakeTelegram; apiBaseUrl?: string; bot?: TelegramBot } = {},
): Promise<AdminTenant> {
  const tenant = await createTenant(app);
  const t = tenant.tenant_id as string;
  const admin = await ok(
    api(app, 'POST', tenantPath(t, '/api-keys'), { body: { role: 'tenant_admin' } }),
    201,
  );
  const viewer = await ok(
    api(app, 'POST', tenantPath(t, '/api-keys'), { body: { role: 'tenant_viewer' } }),
    201,
  );
  const as = { token: admin.key as string };

  const bot = opts.bot ?? newTelegramBot();
  const telegram =
    opts.telegram ??
    (opts.apiBaseUrl === undefined ? await sharedFakeTelegram() : fakeTelegramAt(opts.apiBaseUrl));
  if (!telegram) throw new Error(`setupTenant: no fake Telegram of this process serves ${opts.apiBaseUrl}`);
  telegram.addBot(bot.botToken);
  const secretName = 'telegram-bot';
  const secret = await ok(
    api(app, 'POST', tenantPath(t, '/secrets'), {
      ...as,
      body: {
        name: secretName,
        purpose: 'telegram_bot',
        value: { bot_token: bot.botToken, webhook_secret_token: bot.webhookSecret },
      },
    }),
    201,
  );
  const mp = await ok(
    api(app, 'POST', tenantPath(t, '/model-profiles'), {
      ...as,
      body: { profile_key: 'scripted', provider: 'scripted', model: 'rules' },
    }),
    201,
  );
  const bp = await ok(
    api(app, 'POST', tenantPath(t, '/backend-profiles'), {
      ...as,
      body: { profile_key: 'main', provider: 'postgres' },
    }),
    201,
  );
  const agent = await ok(
    api(app, 'POST', tenantPath(t, '/apps'), {
      ...as,
      body: { app_key: 'assistant', display_name: 'Assistant' },
    }),
    201,
  );
  const rev = await ok(
    api(app, 'POST', tenantPath(t, `/apps/${agent.app_id}/revisions`), {
      ...as,
      body: { model_profile_id: mp.model_profile_id, system_prompt: 'You are helpful.', scripted: SCRIPTED },
    }),
    201,
  );
  await ok(
    api(app, 'POST', tenantPath(t, `/apps/${agent.app_id}/publish`), {
      ...as,
      body: { revision: rev.revision, expected_version: agent.version },
    }),
  );
  await ok(
    api(app, 'PUT', tenantPath(t, '/configuration'), {
      body: configurationOf(tenant, {
        default_backend_profile_id: bp.profile_id,
        default_agent_app_id: agent.app_id,
      }),
    }),
  );
  const binding = await ok(
    api(app, 'POST', tenantPath(t, '/bindings'), {
      ...as,
      body: {
        channel: 'telegram',
        provider_account_id: bot.botId,
        app_id: agent.app_id,
        secret_ref: secret.secret_ref,
        config: { api_base_url: telegram.url },
        activate: true,
      },
    }),
    201,
  );
  return {
    tenantId: t,
    tenantKey: tenant.tenant_key,
    adminKey: admin.key,
    adminKeyId: admin.key_id,
    viewerKey: viewer.key,
    viewerKeyId: viewer.key_id,
    secretRef: secret.secret_ref,
    secretName,
    bot,
    telegram,
    modelProfileId: mp.model_profile_id,
    backendProfileId: bp.profile_id,
    appId: agent.app_id,
    revision: rev.revision,
    bindingId: binding.binding_id,
    routeKey: binding.route_key,
    webhookPath: binding.webhook_path,
  };
}

/** Two independent tenants, A and B, each fully configured through the API. */
export async function setupTwoTenants(app: RequestApp): Promise<{ a: AdminTenant; b: AdminTenant }> {
  const [a, b] = await Promise.all([setupTenant(app), setupTenant(app)]);
  return { a, b };
}

export interface RuntimeRows {
  sessionId: string;
  eventId: string;
  invocationId: string;
  segmentId: string;
  deadLetterId: string;
}

/**
 * Runtime rows the admin API only inspects (message, tool invocation, reply segment, dead
 * letter, usage), written directly as the schema owner: producing them for real needs the
 * worker, which the inspection tests do not depend on.
 */
export async function seedRuntimeRows(sql: Sql, t: AdminTenant): Promise<RuntimeRows> {
  const sessionId = newId('ses');
  const eventId = newId('evt');
  const invocationId = newId('inv');
  const segmentId = newId('seg');
  const deadLetterId = newId('dl');
  const replyId = newId('rep');
  const workflowId = `message-${eventId}`;
  await sql.begin(async (tx) => {
    await tx`insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id, identity_key, last_event_seq)
             values (${t.tenantId}, ${sessionId}, ${t.bindingId}, ${t.appId}, 'direct', '42', ${`direct|42|${sessionId}`}, 1)`;
    const payload = { kind: 'text', text: 'hello', externalMessageId: '1' };
    await tx`insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id, idempotency_key,
                                        event_seq, kind, payload, payload_digest, status, request_id, workflow_id,
                                        reply_id, reply_cache_ref, segment_count, execution_plan)
             values (${t.tenantId}, ${eventId}, ${sessionId}, ${t.bindingId}, '1', ${sha256Hex(eventId)}, 1, 'text',
                     ${tx.json(payload)}, ${contentDigest(payload)}, 'reply_pending', 'req_seed', ${workflowId},
                     ${replyId}, ${replyId}, 1, ${tx.json({ tenant: { id: t.tenantId, version: 2 } })})`;
    await tx`insert into tool_invocation (tenant_id, invocation_id, event_id, session_id, tool_name, tool_capability_digest,
                                          idempotency_key, request_digest, status, attempts)
             values (${t.tenantId}, ${invocationId}, ${eventId}, ${sessionId}, 'create_ticket', ${sha256Hex('cap')},
                     ${`idem-${invocationId}`}, ${sha256Hex('req')}, 'manual', 2)`;
    await tx`insert into reply_outbox (tenant_id, segment_id, event_id, reply_id, idempotency_key, segment_index,
                                       segment_count, channel, target, content, status, attempts)
             values (${t.tenantId}, ${segmentId}, ${eventId}, ${replyId}, ${`out-${segmentId}`}, 0, 1, 'telegram',
                     ${tx.json({ chat_id: '42' })}, 'You said: hello', 'unknown', 1)`;
    await tx`insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, segment_id, reason_class)
             values (${t.tenantId}, ${deadLetterId}, ${eventId}, 'segment', ${segmentId}, 'unknown_outcome')`;
    await tx`insert into usage_event (tenant_id, usage_id, event_id, model_profile_id, tokens_in, tokens_out, cost_minor)
             values (${t.tenantId}, ${newId('use')}, ${eventId}, ${t.modelProfileId}, 120, 30, 7)`;
  });
  return { sessionId, eventId, invocationId, segmentId, deadLetterId };
}

/**
 * A pending audit entry of the tenant written without the key (as whoever controls the database
 * could): the sealer refuses it, so only a quarantine removes it. Returns its pending_id.
 */
export async function seedRefusedPendingAudit(sql: Sql, tenantId: string): Promise<number> {
  const [row] = await sql<{ pending_id: number }[]>`
    insert into audit_pending (tenant_id, audit_id, action, actor_type, actor_id, mac)
    values (${tenantId}, ${newId('aud')}, 'x.forged', 'worker', 'mallory', ${'a'.repeat(64)})
    returning pending_id::int as pending_id`;
  return row!.pending_id;
}

/** Every row of every tenant-owned table (plus the tenant row) for one tenant, as JSON text. */
export async function snapshotTenant(sql: Sql, tenantId: string): Promise<Record<string, string>> {
  const tables = await sql<{ table_name: string }[]>`
    select c.table_name from information_schema.columns c
    join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
    where c.table_schema = 'public' and c.column_name = 'tenant_id' and t.table_type = 'BASE TABLE'
    order by c.table_name`;
  const out: Record<string, string> = {};
  for (const { table_name } of tables) {
    const rows = await sql`
      select to_jsonb(x) as row from ${sql(table_name)} x where tenant_id = ${tenantId}
      order by to_jsonb(x)::text`;
    out[table_name] = JSON.stringify(rows.map((r) => r.row));
  }
  return out;
}
