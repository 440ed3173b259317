import type { Sql } from 'postgres';
import type { ReplyTarget } from '../../channels/inbound';
import type { Channel, ExecutionPlan, MessageStatus } from '../../workflows/shared';
import { jsonb } from '../json';

// The worker's hot-path steps, one statement each (migration 0015: each function switches to the
// runtime role and the tenant itself, so they are called outside any transaction). Decisions that
// need application code are made before or after the call; the functions only persist them.

export type StartRow =
  | { kind: 'not_found' }
  | { kind: 'finished'; status: MessageStatus; outcome: string | null; wake: string[] }
  | {
      kind: 'wait';
      reason: 'session_order' | 'tenant_concurrency' | 'debounce';
      /** debounce: ask again after this long (migration 0036) */
      retry_after_ms?: number;
      /** policy interrupt: the running turn's workflow, to ask to stop early (a hint) */
      interrupt?: string[];
    }
  /** answered by another message's turn (policy collect / interrupt): nothing to do here */
  | { kind: 'merged'; into: string; status: MessageStatus }
  /** the calling run is no longer the message's workflow (replaced by a repair run) */
  | { kind: 'superseded'; workflow_id: string | null }
  | {
      kind: 'execute';
      /** this call moved the message to running and fixed its plan now */
      started: boolean;
      plan: ExecutionPlan | null;
      outcome: string | null;
      committed: boolean;
      permit_limited: boolean;
      limits: unknown;
      /** the tenant has a monthly token budget or spend limit */
      budgeted: boolean;
      text: string | null;
      /** the pinned revision's scripted agent configuration (scripted plans only) */
      scripted: unknown;
      /** this call resumed a repair (execution_reconciling → running) */
      repaired?: boolean;
      /** the revision's double-texting policy (null: no plan) */
      conversation?: ConversationConfig | null;
      /** policy reject: the revision's busy reply (null: the default) */
      busy_reply?: string | null;
      /** runs of the messages merged into this turn now (wake them: they stop) */
      wake?: string[];
    };

/** A revision's double-texting policy as stored (agent_app_revision.conversation). */
export interface ConversationConfig {
  policy?: 'enqueue' | 'collect' | 'interrupt' | 'reject';
  debounce_ms?: number;
  busy_reply?: string;
}

/** received → running once the message may run (session order, tenant permit, gates, plan). */
export async function executionStart(
  sql: Sql,
  p: { tenantId: string; eventId: string; owner: string; leaseSeconds: number; workflowId: string | null },
): Promise<StartRow> {
  const [row] = await sql<{ r: StartRow }[]>`
    select execution_start(${p.tenantId}, ${p.eventId}, ${p.owner}, ${p.leaseSeconds}::int,
                           ${p.workflowId}::text) as r`;
  return row!.r;
}

/**
 * A running execution resuming after an operator's decision takes a tenant permit again, in arrival
 * order (migration 0020); granted at once when the tenant has no limit.
 */
export async function permitAcquire(sql: Sql, p: { tenantId: string; eventId: string }): Promise<boolean> {
  const [row] = await sql<{ r: { granted: boolean } }[]>`
    select permit_acquire(${p.tenantId}, ${p.eventId}) as r`;
  return row!.r.granted;
}

export type CommitRow =
  | {
      kind: 'committed' | 'pinned';
      status: MessageStatus;
      outcome: string | null;
      reply_id: string;
      segment_ids: string[];
      wake: string[];
    }
  | { kind: 'fenced_out'; status: MessageStatus | null }
  /** policy interrupt: messages that arrived during the turn joined it; nothing was committed */
  | { kind: 'interrupted'; status: MessageStatus; wake: string[] };

export interface CommitParams {
  tenantId: string;
  eventId: string;
  owner: string;
  leaseSeconds: number;
  replyId: string;
  text: string;
  contentDigest: string;
  outcome: string | null;
  segments: { segment_id: string; idempotency_key: string; content: string }[];
  wakeWaiters: boolean;
}

/** Memory, pinned reply, reply cache and outbox under a new fence; or the reply pinned earlier. */
export async function executionCommit(sql: Sql, p: CommitParams): Promise<CommitRow> {
  const [row] = await sql<{ r: CommitRow }[]>`
    select execution_commit(${p.tenantId}, ${p.eventId}, ${p.owner}, ${p.leaseSeconds}::int, ${p.replyId},
                            ${p.text}, ${p.contentDigest}, ${p.outcome}, ${jsonb(sql, p.segments)},
                            ${p.wakeWaiters}) as r`;
  return row!.r;
}

/**
 * Policy interrupt: the running execution takes in the messages that arrived during its turn when
 * it may (migration 0036: its revision says interrupt, no side-effecting tool call was made).
 */
export async function conversationAbsorb(
  sql: Sql,
  p: { tenantId: string; eventId: string },
): Promise<{ merged: number; wake: string[] }> {
  const [row] = await sql<{ r: { merged: number; wake: string[] } }[]>`
    select conversation_absorb(${p.tenantId}, ${p.eventId}) as r`;
  return row!.r;
}

/** How a send attempt claims its segment (segment_claim). */
export interface ClaimParams {
  owner: string;
  leaseSeconds: number;
  intervalsMs: object;
  /** Claim only if the chat's next send slot is at most this far away (null: any wait). */
  maxWaitMs: number | null;
}

/**
 * executionCommit, and in the same statement (migration 0018) segmentClaim of the reply's first
 * segment when it is to be sent now (reply_pending, with segments, nobody to wake first); `claim`
 * is null when no claim was attempted.
 */
export async function executionCommitClaim(
  sql: Sql,
  p: CommitParams & { claim: ClaimParams },
): Promise<{ commit: CommitRow; claim: ClaimRow | null }> {
  const c = p.claim;
  const [row] = await sql<(ClaimRow & { committed_reply: CommitRow })[]>`
    select * from execution_commit_claim(${p.tenantId}, ${p.eventId}, ${p.owner}, ${p.leaseSeconds}::int,
                                         ${p.replyId}, ${p.text}, ${p.contentDigest}, ${p.outcome},
                                         ${jsonb(sql, p.segments)}, ${p.wakeWaiters}, ${c.owner},
                                         ${c.leaseSeconds}::int, ${jsonb(sql, c.intervalsMs)},
                                         ${c.maxWaitMs}::int)`;
  const { committed_reply: commit, ...claim } = row!;
  return { commit, claim: claim.segment_id === null ? null : claim };
}

export interface FinishRow {
  status: MessageStatus | null;
  wake: string[];
  not_all_sent?: boolean;
  /** The message's outcome, for the metrics (message_finish returns it since 0025; absent on not_all_sent). */
  outcome?: string | null;
}

/** Terminal transition (replied only when every segment is sent, or failed), audit, summary, wake list. */
export async function messageFinish(
  sql: Sql,
  p: {
    tenantId: string;
    eventId: string;
    failure: { outcome: string; reason: string } | null;
    actor: string;
  },
): Promise<FinishRow> {
  const [row] = await sql<{ r: FinishRow }[]>`
    select message_finish(${p.tenantId}, ${p.eventId}, ${p.failure?.outcome ?? null},
                          ${p.failure?.reason ?? null}, ${p.actor}) as r`;
  return row!.r;
}

export interface ClaimRow {
  claimed: boolean;
  /** the claim took over an expired `sending` lease: the earlier attempt may have sent it */
  taken_over: boolean;
  segment_id: string;
  event_id: string;
  reply_id: string;
  segment_index: number;
  segment_count: number;
  content: string;
  channel: Channel;
  target: ReplyTarget;
  status: string;
  attempts: number;
  fencing_token: number;
  idempotency_key: string;
  binding_id: string;
  created_at: Date;
  last_error: string | null;
  lease_expires_at: Date | null;
  /** how long to wait for the chat's reserved send slot */
  wait_ms: number;
  /** the binding's config and sealed secret; null when not returned or missing */
  config: Record<string, unknown> | null;
  secret_ref: string | null;
  key_id: string | null;
  ciphertext: Buffer | null;
}

/**
 * Claims a segment for one send attempt, reserves the chat's send slot, returns the sealed secret.
 * With maxWaitMs, a slot further away than that claims and reserves nothing (claimed false, the
 * row's status unchanged, wait_ms = how long it would have been).
 */
export async function segmentClaim(
  sql: Sql,
  p: ClaimParams & { tenantId: string; segmentId: string },
): Promise<ClaimRow | null> {
  const [row] = await sql<ClaimRow[]>`
    select * from segment_claim(${p.tenantId}, ${p.segmentId}, ${p.owner}, ${p.leaseSeconds}::int,
                                ${jsonb(sql, p.intervalsMs)}, ${p.maxWaitMs}::int)`;
  return row ?? null;
}

export type SegmentRecord =
  | { status: 'sent'; providerMessageId: string }
  | { status: 'retryable'; error: string; retryAfterMs?: number }
  | { status: 'failed'; error: string }
  | { status: 'unknown'; error: string };

/**
 * Records an attempt's outcome (fenced: ok false when a newer attempt claimed the segment); with
 * `finish`, a sent last segment also finishes the message in the same statement.
 */
export async function segmentRecord(
  sql: Sql,
  p: {
    tenantId: string;
    segmentId: string;
    fencingToken: number;
    outcome: SegmentRecord;
    finish: boolean;
    actor: string;
  },
): Promise<{ ok: boolean; finished?: FinishRow | null }> {
  const o = p.outcome;
  const [row] = await sql<{ r: { ok: boolean; finished?: FinishRow | null } }[]>`
    select segment_record(${p.tenantId}, ${p.segmentId}, ${p.fencingToken}, ${o.status},
                          ${o.status === 'sent' ? o.providerMessageId : null},
                          ${o.status === 'sent' ? null : o.error},
                          ${o.status === 'retryable' && o.retryAfterMs ? Math.ceil(o.retryAfterMs) : null}::int,
                          ${p.finish}, ${p.actor}) as r`;
  return row!.r;
}
