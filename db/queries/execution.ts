import type { TransactionSql } from 'postgres';
import type { InboundMessage, ReplyTarget } from '../../channels/inbound';
import type { ExecutionPlan, MessageStatus } from '../../workflows/shared';

export interface TenantSnapshot {
  tenant_id: string;
  status: 'active' | 'suspended' | 'disabled';
  version: number;
  max_concurrent_executions: number | null;
  monthly_token_budget: number | null;
  monthly_spend_limit_minor: number | null;
  billing_currency: string | null;
  default_backend_profile_id: string | null;
}

/** The worker has no read access to `tenant`; this control-plane function returns one tenant's snapshot. */
export async function tenantSnapshot(tx: TransactionSql, tenantId: string): Promise<TenantSnapshot | null> {
  const rows = await tx<TenantSnapshot[]>`select * from tenant_runtime_snapshot(${tenantId})`;
  return rows[0] ?? null;
}

export interface EventForStart {
  status: MessageStatus;
  kind: 'text' | 'unsupported';
  outcome: string | null;
  payload: InboundMessage;
  execution_plan: ExecutionPlan | null;
  app_id: string;
  published_revision: number | null;
  revision_digest: string | null;
  model_profile_id: string | null;
  model_profile_version: number | null;
  model_profile_digest: string | null;
  model_profile_provider: 'scripted' | 'openai_compatible' | null;
  model_profile_status: string | null;
  /** limits of the revision to run: the pinned one once a plan exists, else the published one */
  revision_limits: unknown;
  workflow_started_at: Date | null;
}

/** Locks the event and reads what fixing its execution plan needs, in one round trip. */
export async function lockEventForStart(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<EventForStart | null> {
  const rows = await tx<EventForStart[]>`
    select e.status, e.kind, e.outcome, e.payload, e.execution_plan, e.workflow_started_at,
           a.app_id, a.published_revision,
           r.content_digest as revision_digest, r.model_profile_id,
           coalesce(pinned.limits, r.limits) as revision_limits,
           m.version as model_profile_version, m.content_digest as model_profile_digest,
           m.provider as model_profile_provider, m.status as model_profile_status
    from message_event e
    join channel_binding b on b.tenant_id = e.tenant_id and b.binding_id = e.binding_id
    join agent_app a on a.tenant_id = b.tenant_id and a.app_id = b.app_id
    left join agent_app_revision r
      on r.tenant_id = a.tenant_id and r.app_id = a.app_id and r.revision = a.published_revision
    left join model_profile m on m.tenant_id = r.tenant_id and m.model_profile_id = r.model_profile_id
    left join agent_app_revision pinned
      on pinned.tenant_id = e.tenant_id and pinned.app_id = e.execution_plan->'app'->>'id'
     and pinned.revision = (e.execution_plan->'app'->>'revision')::int
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId}
    for update of e`;
  return rows[0] ?? null;
}

export async function activeBackendProfile(
  tx: TransactionSql,
  tenantId: string,
  profileId: string,
): Promise<{ profile_id: string; version: number; content_digest: string } | null> {
  const rows = await tx<{ profile_id: string; version: number; content_digest: string }[]>`
    select profile_id, version, content_digest from backend_profile
    where tenant_id = ${tenantId} and profile_id = ${profileId} and status = 'active'`;
  return rows[0] ?? null;
}

/** received → running. Seeds: a running execution always holds an owner, claim, lease and fence. */
export async function markRunning(
  tx: TransactionSql,
  p: {
    tenantId: string;
    eventId: string;
    plan: ExecutionPlan | null;
    outcome: string | null;
    owner: string;
    leaseSeconds: number;
  },
) {
  await tx`
    update message_event
    set status = 'running', execution_plan = ${p.plan ? tx.json(p.plan as never) : null}, outcome = ${p.outcome},
        execution_owner = ${p.owner}, execution_claim_token = gen_random_uuid()::text,
        execution_lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        execution_heartbeat_at = now(), execution_fencing_token = execution_fencing_token + 1,
        execution_attempts = execution_attempts + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and status = 'received'`;
}

export async function markFailed(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
  outcome: string,
  reason: string,
): Promise<MessageStatus | null> {
  const rows = await tx<{ status: MessageStatus }[]>`
    update message_event
    set status = 'failed', outcome = coalesce(outcome, ${outcome}), failure_reason = ${reason}, updated_at = now()
    where tenant_id = ${tenantId} and event_id = ${eventId} and status not in ('replied', 'failed')
    returning status`;
  return rows[0]?.status ?? null;
}

/**
 * Claims the execution for one activity attempt: a new, higher fencing token. Every later write of
 * this attempt is conditioned on it, so an older attempt still running (a zombie after a
 * StartToClose timeout) can no longer write.
 */
export async function claimExecutionFence(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; owner: string; leaseSeconds: number },
): Promise<{
  fencing_token: number;
  status: MessageStatus;
  payload: InboundMessage;
  session_id: string;
} | null> {
  const rows = await tx<
    { fencing_token: number; status: MessageStatus; payload: InboundMessage; session_id: string }[]
  >`
    update message_event
    set execution_fencing_token = execution_fencing_token + 1,
        execution_owner = ${p.owner},
        execution_claim_token = gen_random_uuid()::text,
        execution_lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        execution_heartbeat_at = now(),
        execution_attempts = execution_attempts + 1,
        updated_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and status = 'running'
    returning execution_fencing_token as fencing_token, status, payload, session_id`;
  return rows[0] ?? null;
}

export interface PinnedReply {
  status: MessageStatus;
  outcome: string | null;
  reply_id: string | null;
  segment_count: number | null;
}

export async function readPinnedReply(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<PinnedReply | null> {
  const rows = await tx<PinnedReply[]>`
    select status, outcome, reply_id, segment_count from message_event
    where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return rows[0] ?? null;
}

export async function listSegmentIds(
  tx: TransactionSql,
  tenantId: string,
  replyId: string,
): Promise<string[]> {
  const rows = await tx<{ segment_id: string }[]>`
    select segment_id from reply_outbox where tenant_id = ${tenantId} and reply_id = ${replyId}
    order by segment_index`;
  return rows.map((r) => r.segment_id);
}

export interface CommitReplyParams {
  tenantId: string;
  eventId: string;
  fencingToken: number;
  replyId: string;
  content: string;
  contentDigest: string;
  outcome: string | null;
  channel: string;
  target: ReplyTarget;
  segments: { segmentId: string; idempotencyKey: string; content: string }[];
}

/**
 * Seeds' commit order in one transaction: pin the reply on the event (completed, fenced), write the
 * reply cache, materialize every outbox segment, and move completed → reply_pending. Returns false
 * when the fence no longer matches (a newer attempt owns the execution): nothing is written.
 */
export async function commitReply(tx: TransactionSql, p: CommitReplyParams): Promise<boolean> {
  const pinned = await tx`
    update message_event
    set status = 'completed', reply_id = ${p.replyId}, reply_cache_ref = ${p.replyId},
        segment_count = ${p.segments.length}, outcome = coalesce(outcome, ${p.outcome}), updated_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId}
      and status = 'running' and execution_fencing_token = ${p.fencingToken}`;
  if (pinned.count !== 1) return false;
  await tx`
    insert into reply_cache (tenant_id, reply_id, event_id, content, content_digest)
    values (${p.tenantId}, ${p.replyId}, ${p.eventId}, ${p.content}, ${p.contentDigest})`;
  if (p.segments.length > 0) {
    const rows = p.segments.map((s, i) => ({
      tenant_id: p.tenantId,
      event_id: p.eventId,
      reply_id: p.replyId,
      idempotency_key: s.idempotencyKey,
      segment_id: s.segmentId,
      segment_index: i,
      segment_count: p.segments.length,
      content: s.content,
      channel: p.channel,
      target: p.target,
      status: 'pending',
    }));
    await tx`insert into reply_outbox ${tx(rows as never)}`;
  }
  const next = p.segments.length === 0 ? 'replied' : 'reply_pending';
  await tx`
    update message_event set status = ${next}, committed_at = now(), updated_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and status = 'completed'`;
  return true;
}

/** reply_pending → replied only when every segment of the pinned reply is sent. */
export async function markReplied(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<MessageStatus | null> {
  const rows = await tx<{ status: MessageStatus }[]>`
    update message_event e set status = 'replied', updated_at = now()
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId} and e.status = 'reply_pending'
      and (select count(*) from reply_outbox o
           where o.tenant_id = e.tenant_id and o.reply_id = e.reply_id and o.status = 'sent') = e.segment_count
    returning e.status`;
  if (rows[0]) return rows[0].status;
  const cur = await tx<{ status: MessageStatus }[]>`
    select status from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return cur[0]?.status ?? null;
}

/**
 * Per-session FIFO: the earliest message of the same session, before this one, that has not
 * finished (replied or failed). The database is the truth, so the order holds across workers,
 * restarts and reconciler starts; null means this message may run.
 */
export async function sessionBlocker(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<{ workflow_id: string | null } | null> {
  const rows = await tx<{ workflow_id: string | null }[]>`
    select p.workflow_id from message_event e
    join message_event p on p.tenant_id = e.tenant_id and p.session_id = e.session_id and p.event_seq < e.event_seq
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId}
      and p.status not in ('replied', 'failed')
    order by p.event_seq limit 1`;
  return rows[0] ?? null;
}

/**
 * Tenant concurrency permits: executions in `running` whose lease is alive. Every claim and every
 * tool step extends the lease (extendExecutionLease); a run that crashed or was terminated stops
 * extending it, so its permit returns when the lease expires. Callers
 * hold the tenant's advisory lock so two claims cannot both take the last permit.
 */
export async function tenantHasPermit(
  tx: TransactionSql,
  tenantId: string,
  max: number | null,
): Promise<boolean> {
  if (max === null) return true;
  await tx`select pg_advisory_xact_lock(hashtextextended(${`permits:${tenantId}`}, 0))`;
  const [row] = await tx<{ n: number }[]>`
    select count(*)::int as n from message_event
    where tenant_id = ${tenantId} and status = 'running' and execution_lease_expires_at > now()`;
  return (row?.n ?? 0) < max;
}

/** The next unfinished message of the session after this one, to wake when this one finishes. */
export async function sessionSuccessor(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<string | null> {
  const rows = await tx<{ workflow_id: string | null }[]>`
    select n.workflow_id from message_event e
    join message_event n on n.tenant_id = e.tenant_id and n.session_id = e.session_id and n.event_seq > e.event_seq
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId} and n.status not in ('replied', 'failed')
    order by n.event_seq limit 1`;
  return rows[0]?.workflow_id ?? null;
}

/** Oldest waiting messages of the tenant (received, not yet claimed): woken when a permit frees. */
export async function tenantWaiters(tx: TransactionSql, tenantId: string, limit: number): Promise<string[]> {
  const rows = await tx<{ workflow_id: string }[]>`
    select workflow_id from message_event
    where tenant_id = ${tenantId} and status = 'received' and workflow_id is not null
    order by created_at limit ${limit}`;
  return rows.map((r) => r.workflow_id);
}

/** What a step of an execution (model turn, tool call, commit, audit) needs to know about its message. */
export interface EventContext {
  status: MessageStatus;
  session_id: string;
  binding_id: string;
  event_seq: number;
  channel: 'telegram' | 'wecom';
  payload: InboundMessage;
  execution_plan: ExecutionPlan | null;
}

export async function eventContext(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<EventContext | null> {
  const rows = await tx<EventContext[]>`
    select e.status, e.session_id, e.binding_id, e.event_seq, b.channel, e.payload, e.execution_plan
    from message_event e join channel_binding b on b.tenant_id = e.tenant_id and b.binding_id = e.binding_id
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId}`;
  return rows[0] ?? null;
}

/** Durable memory of the turn (seeds: written before the reply is materialized, with its source event). */
export async function insertTurnMemory(
  tx: TransactionSql,
  p: {
    tenantId: string;
    eventId: string;
    sessionId: string;
    userId: string;
    userText: string;
    replyText: string;
  },
) {
  const entries = [
    { role: 'user', content: p.userText, suffix: 'u' },
    { role: 'assistant', content: p.replyText, suffix: 'a' },
  ].filter((e) => e.content.length > 0);
  for (const e of entries) {
    await tx`
      insert into memory_entry (tenant_id, memory_id, user_id, session_id, source_event_id, role, content, content_digest)
      values (${p.tenantId}, ${`mem_${p.eventId.slice(4)}_${e.suffix}`}, ${p.userId}, ${p.sessionId}, ${p.eventId},
              ${e.role}, ${e.content}, encode(sha256(convert_to(${e.content}, 'UTF8')), 'hex'))
      on conflict do nothing`;
  }
}

export async function markWorkflowStarted(tx: TransactionSql, tenantId: string, eventId: string) {
  await tx`update message_event set workflow_started_at = now()
           where tenant_id = ${tenantId} and event_id = ${eventId} and workflow_started_at is null`;
}

/**
 * Extends a running execution's lease (never shortens it): the execution still holds its
 * concurrency permit while it works or waits for an operator.
 */
export async function extendExecutionLease(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; seconds: number },
) {
  await tx`
    update message_event
    set execution_lease_expires_at = greatest(execution_lease_expires_at, now() + make_interval(secs => ${p.seconds})),
        execution_heartbeat_at = now()
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and status = 'running'`;
}
