import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import { inject } from 'vitest';
import type { ActivityDeps } from '../../activities/deps';
import type { InboundMessage } from '../../channels/inbound';
import { createSql } from '../../db/client';
import { newId } from '../../db/ids';
import { contentDigest, sha256Hex } from '../../lib/digest';
import { createLogger } from '../../lib/log';
import { createSecretBox, type SecretBox, secretAad } from '../../lib/secret-box';
import type { ExecutionPlan } from '../../workflows/shared';
import { sealNow } from './audit';
import { SUITE_AUDIT_KEY } from './db-logins';

// Seeds, as the schema owner, a tenant with one message already `running` under a fixed
// ExecutionPlan, so model and tool activities can be called directly (no workflow, no ingress).

/** The suite's master key (the same one tests/helpers/harness.ts uses). */
const TEST_MASTER_KEY = Buffer.alloc(32, 7).toString('base64');

export interface TestDeps extends ActivityDeps {
  close(): Promise<void>;
}

let workers = 0;

/** ActivityDeps as the worker builds them, against the suite's PostgreSQL. */
export function createTestDeps(overrides: Partial<ActivityDeps> = {}): TestDeps {
  const sql = createSql(inject('databaseUrl'), { max: 8, auditKey: SUITE_AUDIT_KEY });
  return {
    sql,
    secrets: createSecretBox(TEST_MASTER_KEY),
    log: createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    suspendedReply: 'This service is temporarily unavailable.',
    workerId: `test-worker-${process.pid}-${workers++}`,
    sendTimeoutMs: 2000,
    ...overrides,
    close: () => sql.end(),
  };
}

export interface ExecutionSeedOptions {
  provider?: 'scripted' | 'openai_compatible';
  /** openai_compatible: the endpoint's base URL (e.g. the fake's `${url}/v1`) */
  baseUrl?: string;
  /** openai_compatible: stored as a tenant secret and referenced by the profile */
  apiKey?: string;
  model?: string;
  parameters?: Record<string, unknown>;
  pricing?: { input_per_mtok_minor: number | null; output_per_mtok_minor: number | null };
  scripted?: unknown;
  tools?: unknown[];
  limits?: Record<string, unknown>;
  systemPrompt?: string;
  tenant?: {
    monthly_token_budget?: number | null;
    monthly_spend_limit_minor?: number | null;
    billing_currency?: string | null;
  };
  /** the first message's text */
  text?: string;
}

export interface ExecutionSeed {
  tenantId: string;
  appId: string;
  bindingId: string;
  modelProfileId: string;
  sessionId: string;
  /** the running message */
  eventId: string;
  eventSeq: number;
  plan: ExecutionPlan;
}

let seq = 0;
const unique = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq++}`;

export async function seedExecution(
  sql: Sql,
  secrets: SecretBox,
  opts: ExecutionSeedOptions = {},
): Promise<ExecutionSeed> {
  const tenantId = newId('t');
  const appId = newId('app');
  const mpId = newId('mp');
  const bpId = newId('bp');
  const bindingSecretRef = newId('sec');
  const apiKeySecretRef = opts.apiKey ? newId('sec') : null;
  const bindingId = newId('cb');
  const sessionId = `ses_${randomBytes(12).toString('hex')}`;
  const provider = opts.provider ?? 'scripted';
  const profile = {
    provider,
    model: opts.model ?? (provider === 'scripted' ? 'rules' : 'fake-model'),
    base_url: opts.baseUrl ?? null,
    api_key_secret_ref: apiKeySecretRef,
    parameters: opts.parameters ?? {},
    pricing: opts.pricing ?? null,
  };
  const profileDigest = contentDigest(profile);
  const scripted =
    opts.scripted ?? (provider === 'scripted' ? { rules: [], default_reply: 'You said: {{text}}' } : null);
  const revision = {
    system_prompt: opts.systemPrompt ?? 'You are helpful.',
    tools: opts.tools ?? [],
    scripted,
    limits: opts.limits ?? {},
  };
  const revisionDigest = contentDigest(revision);
  const botId = String(100000 + Math.floor(Math.random() * 1e9));

  await sql.begin(async (tx) => {
    const t = opts.tenant ?? {};
    await tx`insert into tenant (tenant_id, tenant_key, display_name, monthly_token_budget, monthly_spend_limit_minor,
                                 billing_currency)
             values (${tenantId}, ${unique('t')}, 'Execution test tenant', ${t.monthly_token_budget ?? null},
                     ${t.monthly_spend_limit_minor ?? null}, ${t.billing_currency ?? null})`;
    await seedSecret(
      tx as unknown as Sql,
      secrets,
      tenantId,
      bindingSecretRef,
      unique('tg'),
      'telegram_bot',
      {
        bot_token: `${botId}:TEST`,
        webhook_secret_token: 'x',
      },
    );
    if (apiKeySecretRef)
      await seedSecret(
        tx as unknown as Sql,
        secrets,
        tenantId,
        apiKeySecretRef,
        unique('llm'),
        'model_api_key',
        opts.apiKey!,
      );
    await tx`insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, base_url,
                                        api_key_secret_ref, parameters, input_per_mtok_minor, output_per_mtok_minor,
                                        content_digest)
             values (${tenantId}, ${mpId}, 'main', ${provider}, ${profile.model}, ${profile.base_url},
                     ${apiKeySecretRef}, ${tx.json(profile.parameters as never)},
                     ${opts.pricing?.input_per_mtok_minor ?? null}, ${opts.pricing?.output_per_mtok_minor ?? null},
                     ${profileDigest})`;
    await tx`insert into backend_profile (tenant_id, profile_id, profile_key, provider, content_digest)
             values (${tenantId}, ${bpId}, 'main', 'postgres', ${contentDigest({ provider: 'postgres' })})`;
    await tx`insert into agent_app (tenant_id, app_id, app_key, display_name) values (${tenantId}, ${appId}, 'assistant', 'Assistant')`;
    await tx`insert into agent_app_revision (tenant_id, app_id, revision, model_profile_id, system_prompt, tools, scripted,
                                             limits, content_digest, created_by)
             values (${tenantId}, ${appId}, 1, ${mpId}, ${revision.system_prompt}, ${tx.json(revision.tools as never)},
                     ${scripted === null ? null : tx.json(scripted as never)}, ${tx.json(revision.limits as never)},
                     ${revisionDigest}, 'test')`;
    await tx`update agent_app set published_revision = 1 where tenant_id = ${tenantId} and app_id = ${appId}`;
    await tx`update tenant set default_backend_profile_id = ${bpId}, default_agent_app_id = ${appId}
             where tenant_id = ${tenantId}`;
    const config = { api_base_url: 'http://127.0.0.1:9' };
    await tx`insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                          app_id, secret_ref, config, config_digest, status)
             values (${tenantId}, ${bindingId}, 'telegram', ${botId}, ${sha256Hex(randomBytes(16))}, ${appId},
                     ${bindingSecretRef}, ${tx.json(config)}, ${contentDigest(config)}, 'active')`;
    await tx`insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id, external_chat_id,
                                  identity_key, last_event_seq)
             values (${tenantId}, ${sessionId}, ${bindingId}, ${appId}, 'direct', '4242', '4242',
                     ${unique('identity')}, 0)`;
  });

  const plan: ExecutionPlan = {
    tenant: { id: tenantId, version: 1 },
    app: { id: appId, revision: 1, digest: revisionDigest },
    modelProfile: { id: mpId, version: 1, digest: profileDigest, provider },
    backendProfile: { id: bpId, version: 1, digest: contentDigest({ provider: 'postgres' }) },
  };
  const seed = { tenantId, appId, bindingId, modelProfileId: mpId, sessionId, plan };
  const first = await addMessage(sql, seed, { text: opts.text ?? 'hello', status: 'running' });
  return { ...seed, eventId: first.eventId, eventSeq: first.eventSeq };
}

async function seedSecret(
  tx: Sql,
  secrets: SecretBox,
  tenantId: string,
  secretRef: string,
  name: string,
  purpose: 'telegram_bot' | 'model_api_key',
  value: unknown,
) {
  await tx`insert into secret (tenant_id, secret_ref, name, purpose)
           values (${tenantId}, ${secretRef}, ${name}, ${purpose})`;
  const sealed = secrets.seal(
    typeof value === 'string' ? value : JSON.stringify(value),
    secretAad(tenantId, secretRef),
  );
  await tx`insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
           values (${tenantId}, ${secretRef}, 1, ${secrets.keyId}, ${sealed})`;
}

/**
 * Appends a message to the seed's session: `running` (claimed once, under the seed's plan) or
 * `replied` with its pinned reply (history for the next turn).
 */
export async function addMessage(
  sql: Sql,
  seed: Pick<ExecutionSeed, 'tenantId' | 'bindingId' | 'sessionId' | 'plan'>,
  p: { text: string; status: 'running' | 'replied'; reply?: string },
): Promise<{ eventId: string; eventSeq: number }> {
  const eventId = `evt_${randomBytes(12).toString('hex')}`;
  const externalId = unique('m');
  const payload: InboundMessage = {
    channel: 'telegram',
    externalMessageId: externalId,
    kind: 'text',
    text: p.text,
    platformType: 'text',
    senderId: '4242',
    chatId: '4242',
    chatType: 'direct',
    threadId: null,
    sentAt: new Date().toISOString(),
  };
  return sql.begin(async (tx) => {
    const [s] = await tx<{ last_event_seq: number }[]>`
      update session set last_event_seq = last_event_seq + 1
      where tenant_id = ${seed.tenantId} and session_id = ${seed.sessionId}
      returning last_event_seq`;
    const eventSeq = Number(s!.last_event_seq);
    const replyId = `rep_${eventId.slice(4)}`;
    await tx`insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id,
                                        idempotency_key, event_seq, kind, payload, payload_digest, status,
                                        request_id, execution_owner, execution_claim_token,
                                        execution_lease_expires_at, execution_fencing_token, execution_attempts,
                                        execution_plan)
             values (${seed.tenantId}, ${eventId}, ${seed.sessionId}, ${seed.bindingId}, ${externalId},
                     ${sha256Hex(eventId)}, ${eventSeq}, 'text', ${tx.json(payload as never)},
                     ${contentDigest(payload)}, 'running', ${unique('req')}, 'seed', 'seed',
                     now() + interval '5 minutes', 1, 1, ${tx.json(seed.plan as never)})`;
    if (p.status === 'replied') {
      const reply = p.reply ?? `reply to ${p.text}`;
      await tx`update message_event set status = 'completed', reply_id = ${replyId}, reply_cache_ref = ${replyId},
                                        segment_count = 0
               where tenant_id = ${seed.tenantId} and event_id = ${eventId}`;
      await tx`insert into reply_cache (tenant_id, reply_id, event_id, content, content_digest)
               values (${seed.tenantId}, ${replyId}, ${eventId}, ${reply}, ${sha256Hex(reply)})`;
      await tx`update message_event set status = 'replied' where tenant_id = ${seed.tenantId} and event_id = ${eventId}`;
    }
    return { eventId, eventSeq };
  });
}

/** Reads the tool_invocation rows of one message (as the schema owner). */
export async function invocationsOf(sql: Sql, tenantId: string, eventId: string) {
  return sql<
    {
      invocation_id: string;
      tool_name: string;
      status: string;
      attempts: number;
      idempotency_key: string;
      fencing_token: number;
      last_error: string | null;
      provider_receipt: unknown;
      resolved_at: Date | null;
    }[]
  >`select invocation_id, tool_name, status, attempts, idempotency_key, fencing_token, last_error,
           provider_receipt, resolved_at
    from tool_invocation where tenant_id = ${tenantId} and event_id = ${eventId} order by created_at`;
}

/** The tenant's runtime audit entries, oldest first (sealed first: they are written pending). */
export async function auditOf(sql: Sql, tenantId: string) {
  await sealNow(sql, tenantId);
  return sql<
    {
      action: string;
      decision: string | null;
      tool_name: string | null;
      error_type: string | null;
      cost_minor: number | null;
      latency_ms: number | null;
      event_seq: number | null;
      session_id: string | null;
      model_profile_id: string | null;
      details: Record<string, unknown>;
    }[]
  >`select action, decision, tool_name, error_type, cost_minor, latency_ms, event_seq, session_id, model_profile_id,
           details
    from audit_log where tenant_id = ${tenantId} order by seq`;
}
