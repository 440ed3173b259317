// Helpers for the end-to-end execution tests: messages go in through the real Telegram webhook,
// configuration changes go through the admin API, and assertions read the database (as the schema
// owner) and the workflow's Temporal history.
import type { Sql } from 'postgres';
import { type AdminTenant, api, type Json, ok, type RequestApp, tenantPath } from './admin';
import { sealNow } from './audit';
import type { Harness } from './harness';
import { telegramTextUpdate } from './seed';
import { waitFor } from './wait';

/** What posting to a Telegram binding needs (a seeded or an API-built tenant). */
export interface TelegramRoute {
  routeKey: string;
  webhookSecret: string;
}

export const routeOf = (t: AdminTenant): TelegramRoute => ({
  routeKey: t.routeKey,
  webhookSecret: t.bot.webhookSecret,
});

/** Posts one Telegram text message to the binding's webhook; asserts it was recorded (200). */
export async function sendText(h: Harness, t: TelegramRoute, chatId: number, text: string): Promise<void> {
  const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
    body: JSON.stringify(telegramTextUpdate({ chatId, text })),
  });
  if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
}

/**
 * Creates a revision of the tenant's app through the admin API and publishes it (reading the
 * app's current version for the optimistic lock). Returns the revision number.
 */
export async function publishRevision(
  app: RequestApp,
  t: AdminTenant,
  revision: Record<string, unknown>,
): Promise<number> {
  const as = { token: t.adminKey };
  const created = await ok(
    api(app, 'POST', tenantPath(t.tenantId, `/apps/${t.appId}/revisions`), {
      ...as,
      body: { model_profile_id: t.modelProfileId, system_prompt: 'You are helpful.', ...revision },
    }),
    201,
  );
  const current = await ok(api(app, 'GET', tenantPath(t.tenantId, `/apps/${t.appId}`), as));
  await ok(
    api(app, 'POST', tenantPath(t.tenantId, `/apps/${t.appId}/publish`), {
      ...as,
      body: { revision: created.revision, expected_version: current.version },
    }),
  );
  return created.revision as number;
}

/**
 * An openai_compatible model profile created through the admin API, its API key stored as a tenant
 * secret. Returns the profile as the API answered.
 */
export async function createOpenAIProfile(
  app: RequestApp,
  t: AdminTenant,
  p: {
    baseUrl: string;
    apiKey: string;
    model?: string;
    pricing?: { input_per_mtok_minor: number; output_per_mtok_minor: number };
    /** model_profile.stream (omitted: the default, false) */
    stream?: boolean;
  },
): Promise<Json> {
  const as = { token: t.adminKey };
  const secret = await ok(
    api(app, 'POST', tenantPath(t.tenantId, '/secrets'), {
      ...as,
      body: {
        name: `llm-${Math.random().toString(36).slice(2, 8)}`,
        purpose: 'model_api_key',
        value: p.apiKey,
      },
    }),
    201,
  );
  return ok(
    api(app, 'POST', tenantPath(t.tenantId, '/model-profiles'), {
      ...as,
      body: {
        profile_key: `llm-${Math.random().toString(36).slice(2, 8)}`,
        provider: 'openai_compatible',
        model: p.model ?? 'fake-model',
        base_url: p.baseUrl,
        api_key_secret_ref: secret.secret_ref,
        ...(p.pricing ? { pricing: p.pricing } : {}),
        ...(p.stream === undefined ? {} : { stream: p.stream }),
      },
    }),
    201,
  );
}

export interface MessageState {
  event_id: string;
  workflow_id: string;
  chat_id: string;
  text: string;
  status: string;
  outcome: string | null;
  failure_reason: string | null;
  execution_attempts: number;
}

export async function messagesOf(sql: Sql, tenantId: string): Promise<MessageState[]> {
  return sql<MessageState[]>`
    select event_id, workflow_id, payload->>'chatId' as chat_id, payload->>'text' as text, status, outcome,
           failure_reason, execution_attempts
    from message_event where tenant_id = ${tenantId} order by created_at, event_seq`;
}

/** Waits for the message with this text to exist and to satisfy `done`; returns it. */
export async function waitForMessage(
  sql: Sql,
  tenantId: string,
  text: string,
  done: (m: MessageState) => boolean,
  timeoutMs = 30_000,
): Promise<MessageState> {
  let found: MessageState | undefined;
  await waitFor(
    async () => {
      found = (await messagesOf(sql, tenantId)).find((m) => m.text === text);
      return found !== undefined && done(found);
    },
    { timeoutMs, label: `message "${text}" (last seen: ${found?.status ?? 'none'})` },
  );
  return found!;
}

export const finished = (m: MessageState) => m.status === 'replied' || m.status === 'failed';

export interface InvocationState {
  invocation_id: string;
  event_id: string;
  tool_name: string;
  status: string;
  attempts: number;
  idempotency_key: string;
  fencing_token: number;
  last_error: string | null;
  resolution: Record<string, unknown> | null;
  resolved_at: Date | null;
}

export async function invocationsOfTenant(sql: Sql, tenantId: string): Promise<InvocationState[]> {
  return sql<InvocationState[]>`
    select invocation_id, event_id, tool_name, status, attempts, idempotency_key, fencing_token, last_error,
           resolution, resolved_at
    from tool_invocation where tenant_id = ${tenantId} order by created_at`;
}

/** Waits until the message's (only) tool invocation satisfies `done`; returns it. */
export async function waitForInvocation(
  sql: Sql,
  tenantId: string,
  eventId: () => Promise<string>,
  done: (i: InvocationState) => boolean,
  timeoutMs = 30_000,
): Promise<InvocationState> {
  let found: InvocationState | undefined;
  await waitFor(
    async () => {
      const id = await eventId().catch(() => null);
      if (!id) return false;
      found = (await invocationsOfTenant(sql, tenantId)).find((i) => i.event_id === id);
      return found !== undefined && done(found);
    },
    { timeoutMs, label: `tool invocation (last seen: ${found?.status ?? 'none'})` },
  );
  return found!;
}

export interface AuditRow {
  action: string;
  decision: string | null;
  actor_type: string;
  actor_id: string;
  tool_name: string | null;
  error_type: string | null;
  reason: string | null;
  details: Record<string, unknown>;
}

/** The tenant's audit chain, oldest first, after sealing its pending runtime entries. */
export async function auditOfTenant(sql: Sql, tenantId: string): Promise<AuditRow[]> {
  await sealNow(sql, tenantId);
  return sql<AuditRow[]>`
    select action, decision, actor_type, actor_id, tool_name, error_type, reason, details
    from audit_log where tenant_id = ${tenantId} order by seq`;
}

/**
 * From the workflow's history: each regular activity type with how often it was scheduled and
 * the attempt number of its last start (retries do not add scheduled events).
 */
export async function activitiesOf(
  h: Harness,
  workflowId: string,
): Promise<Record<string, { scheduled: number; lastAttempt: number; failureType: string | null }>> {
  const history = await h.temporal.workflow.getHandle(workflowId).fetchHistory();
  const out: Record<string, { scheduled: number; lastAttempt: number; failureType: string | null }> = {};
  const typeById = new Map<string, string>();
  for (const e of history.events ?? []) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const type = scheduled.activityType?.name ?? '?';
      typeById.set(String(e.eventId), type);
      out[type] ??= { scheduled: 0, lastAttempt: 0, failureType: null };
      out[type].scheduled++;
    }
    const started = e.activityTaskStartedEventAttributes;
    if (started) {
      const type = typeById.get(String(started.scheduledEventId));
      if (type && out[type]) out[type].lastAttempt = started.attempt ?? 0;
    }
    const failed = e.activityTaskFailedEventAttributes;
    if (failed) {
      const type = typeById.get(String(failed.scheduledEventId));
      if (type && out[type]) out[type].failureType = failed.failure?.applicationFailureInfo?.type ?? null;
    }
  }
  return out;
}
