import type { TransactionSql } from 'postgres';

// Usage events (immutable billing facts) and what a model turn reads and writes around its call:
// the month's totals for the budget gate, the pinned model profile with its API key's sealed
// value, the session's recent history, and the fence check its usage commit is conditioned on.

export interface UsageTotals {
  tokens_in: number;
  tokens_out: number;
  cost_minor: number;
}

/** The first instant of the UTC month that contains `at`, as ISO 8601. */
export function utcMonthStart(at: Date = new Date()): string {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)).toISOString();
}

/** Sums of one tenant's usage events in the calendar month (UTC) that starts at `monthStartIso`. */
export async function monthUsage(
  tx: TransactionSql,
  tenantId: string,
  monthStartIso: string,
): Promise<UsageTotals> {
  const [row] = await tx<UsageTotals[]>`
    select coalesce(sum(tokens_in), 0)::bigint as tokens_in,
           coalesce(sum(tokens_out), 0)::bigint as tokens_out,
           coalesce(sum(cost_minor), 0)::bigint as cost_minor
    from usage_event
    where tenant_id = ${tenantId}
      and occurred_at >= ${monthStartIso}::timestamptz
      and occurred_at < ${monthStartIso}::timestamptz + interval '1 month'`;
  return {
    tokens_in: Number(row?.tokens_in ?? 0),
    tokens_out: Number(row?.tokens_out ?? 0),
    cost_minor: Number(row?.cost_minor ?? 0),
  };
}

export interface UsageEventInput {
  usageId: string;
  tenantId: string;
  eventId: string | null;
  modelProfileId: string;
  tokensIn: number;
  tokensOut: number;
  costMinor: number;
  currency: string | null;
}

export async function insertUsageEvent(tx: TransactionSql, u: UsageEventInput): Promise<void> {
  await tx`
    insert into usage_event (tenant_id, usage_id, event_id, model_profile_id, tokens_in, tokens_out,
                             cost_minor, currency)
    values (${u.tenantId}, ${u.usageId}, ${u.eventId}, ${u.modelProfileId}, ${u.tokensIn}, ${u.tokensOut},
            ${u.costMinor}, ${u.currency})`;
}

/** Price per million tokens in minor units; a missing price counts as free. Rounded up. */
export function usageCostMinor(
  tokensIn: number,
  tokensOut: number,
  price: { input_per_mtok_minor: number | null; output_per_mtok_minor: number | null },
): number {
  const micro =
    BigInt(Math.max(0, Math.trunc(tokensIn))) * BigInt(price.input_per_mtok_minor ?? 0) +
    BigInt(Math.max(0, Math.trunc(tokensOut))) * BigInt(price.output_per_mtok_minor ?? 0);
  return Number((micro + 999_999n) / 1_000_000n);
}

/**
 * Locks the message row if this attempt still holds the execution fence (status running, same
 * fencing token), returning what an audit entry needs; null when a newer attempt claimed it. The
 * row lock makes a concurrent claim wait for this transaction, so everything written after this
 * check in the same transaction is written under the fence.
 */
export async function lockExecutionFence(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; fencingToken: number },
): Promise<{ event_seq: number; session_id: string; binding_id: string } | null> {
  const rows = await tx<{ event_seq: number; session_id: string; binding_id: string }[]>`
    update message_event set execution_heartbeat_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId}
      and status = 'running' and execution_fencing_token = ${p.fencingToken}
    returning event_seq, session_id, binding_id`;
  return rows[0] ?? null;
}

export interface PinnedModelProfile {
  model_profile_id: string;
  provider: 'scripted' | 'openai_compatible';
  model: string;
  base_url: string | null;
  api_key_secret_ref: string | null;
  parameters: Record<string, unknown>;
  input_per_mtok_minor: number | null;
  output_per_mtok_minor: number | null;
  /** the model takes image parts (model_profile.vision) */
  vision: boolean;
  /** the model is called with streaming (model_profile.stream) */
  stream: boolean;
  status: 'active' | 'disabled';
  version: number;
  content_digest: string;
}

export async function loadModelProfile(
  tx: TransactionSql,
  tenantId: string,
  modelProfileId: string,
): Promise<PinnedModelProfile | null> {
  const rows = await tx<PinnedModelProfile[]>`
    select model_profile_id, provider, model, base_url, api_key_secret_ref, parameters,
           input_per_mtok_minor, output_per_mtok_minor, vision, stream, status, version, content_digest
    from model_profile where tenant_id = ${tenantId} and model_profile_id = ${modelProfileId}`;
  return rows[0] ?? null;
}

/**
 * The content of the model profile version an execution plan pinned (model_profile_version keeps
 * every version). A profile whose version row is missing is read from model_profile only while
 * that row still is the pinned version (same version and digest), e.g. one written before
 * versions were kept; null otherwise. `status` is the profile's current status (not versioned).
 */
export async function loadPinnedModelProfile(
  tx: TransactionSql,
  tenantId: string,
  pinned: { id: string; version: number; digest: string },
): Promise<PinnedModelProfile | null> {
  const rows = await tx<PinnedModelProfile[]>`
    select v.model_profile_id, v.provider, v.model, v.base_url, v.api_key_secret_ref, v.parameters,
           v.input_per_mtok_minor, v.output_per_mtok_minor, v.vision, v.stream, p.status, v.version, v.content_digest
    from model_profile_version v
    join model_profile p on p.tenant_id = v.tenant_id and p.model_profile_id = v.model_profile_id
    where v.tenant_id = ${tenantId} and v.model_profile_id = ${pinned.id} and v.version = ${pinned.version}`;
  if (rows[0]) return rows[0];
  const live = await loadModelProfile(tx, tenantId, pinned.id);
  return live && live.version === pinned.version && live.content_digest === pinned.digest ? live : null;
}

/**
 * A model profile's API key, its current version still sealed; null when missing or disabled.
 * Only a `model_api_key` secret: a profile version pinned before purposes existed may still point
 * at a channel secret, which is never sent to a model URL.
 */
export async function currentSealedSecret(
  tx: TransactionSql,
  tenantId: string,
  secretRef: string,
): Promise<{ key_id: string; ciphertext: Buffer } | null> {
  const rows = await tx<{ key_id: string; ciphertext: Buffer }[]>`
    select v.key_id, v.ciphertext
    from secret s
    join secret_version v on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref
                         and v.version = s.current_version
    where s.tenant_id = ${tenantId} and s.secret_ref = ${secretRef} and s.status = 'active'
      and s.purpose = 'model_api_key'`;
  return rows[0] ?? null;
}

export interface HistoryTurn {
  event_seq: number;
  user_text: string | null;
  reply_text: string;
}

/**
 * The session's context before `beforeSeq`: its ready summary, and the last `limit` replied
 * messages after the summary's base with their pinned replies, oldest first. A busy reply (policy
 * reject) is no exchange of the conversation and is left out (migration 0036).
 */
export async function sessionHistory(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; beforeSeq: number; limit: number },
): Promise<{ summary: string | null; turns: HistoryTurn[] }> {
  const [summary] = await tx<{ content: string | null; base_event_seq: number }[]>`
    select content, base_event_seq from session_summary
    where tenant_id = ${p.tenantId} and session_id = ${p.sessionId} and status = 'ready'`;
  const base = summary?.content ? summary.base_event_seq : 0;
  const turns = await tx<HistoryTurn[]>`
    select * from (
      -- A merged turn (conversation policy collect / interrupt) answered all of its messages.
      select e.event_seq, conversation_turn_text(e.tenant_id, e.event_id) as user_text, c.content as reply_text
      from message_event e
      join reply_cache c on c.tenant_id = e.tenant_id and c.reply_id = e.reply_id
      where e.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId} and e.status = 'replied'
        and e.outcome is distinct from 'busy_rejected'
        and e.event_seq < ${p.beforeSeq} and e.event_seq > ${base}
      order by e.event_seq desc
      limit ${p.limit}
    ) recent order by event_seq`;
  return { summary: summary?.content ?? null, turns };
}
