import type { TransactionSql } from 'postgres';
import type { DeadLetterRow } from './dead-letters';
import { sortTs } from './page';

// The facts a message's timeline is assembled from (api/admin/message-timeline.ts), read in one
// snapshot. Every timestamp comes back as text with microseconds (PostgreSQL's precision), so the
// entries sort exactly and none is rounded through a JS Date.

/** A timestamp column (or NULL) as `YYYY-MM-DDTHH:MI:SS.ffffffZ`. */
const ts = sortTs;

/**
 * The tenant's audit entries, sealed or still pending (the runtime's entries wait in audit_pending
 * until the sealer links them into the chain, migration 0030): a timeline shows what happened at
 * once. A pending entry has no seq yet and sorts after sealed ones at the same instant.
 */
const auditEntries = (tx: TransactionSql) => tx`(
  select tenant_id, action, actor_type, actor_id, decision, reason, tool_name, latency_ms, error_type,
         cost_minor, details, occurred_at, session_id, event_seq, seq
  from audit_log
  union all
  select tenant_id, action, actor_type, actor_id, decision, reason, tool_name, latency_ms, error_type,
         cost_minor, details, occurred_at, session_id, event_seq, null::bigint as seq
  from audit_pending)`;

export interface TimelineEventRow {
  event_id: string;
  session_id: string;
  binding_id: string;
  event_seq: number;
  kind: string;
  status: string;
  outcome: string | null;
  failure_reason: string | null;
  request_id: string;
  trace_id: string | null;
  workflow_id: string | null;
  execution_plan: Record<string, unknown> | null;
  execution_attempts: number;
  repair_count: number;
  reply_id: string | null;
  segment_count: number | null;
  created_at: string;
  workflow_started_at: string | null;
  permit_requested_at: string | null;
  execution_heartbeat_at: string | null;
  committed_at: string | null;
  updated_at: string;
}

export async function timelineEvent(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<TimelineEventRow | null> {
  const rows = await tx<TimelineEventRow[]>`
    select event_id, session_id, binding_id, event_seq::int as event_seq, kind, status, outcome,
           failure_reason, request_id, trace_id, workflow_id, execution_plan, execution_attempts,
           repair_count, reply_id, segment_count,
           ${ts(tx, 'created_at')} as created_at, ${ts(tx, 'workflow_started_at')} as workflow_started_at,
           ${ts(tx, 'permit_requested_at')} as permit_requested_at,
           ${ts(tx, 'execution_heartbeat_at')} as execution_heartbeat_at,
           ${ts(tx, 'committed_at')} as committed_at, ${ts(tx, 'updated_at')} as updated_at
    from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return rows[0] ?? null;
}

/** The session's previous message and when it last finished (its `message.finished` audit entry). */
export async function previousInLane(
  tx: TransactionSql,
  e: Pick<TimelineEventRow, 'session_id' | 'event_seq'> & { tenantId: string },
): Promise<{ event_id: string; status: string; finished_at: string | null } | null> {
  const rows = await tx<{ event_id: string; status: string; finished_at: string | null }[]>`
    select p.event_id, p.status,
           (select ${ts(tx, 'occurred_at')} from ${auditEntries(tx)} a
            where a.tenant_id = p.tenant_id and a.occurred_at >= p.created_at
              and a.action = 'message.finished' and a.details ->> 'event_id' = p.event_id
            order by a.occurred_at desc limit 1) as finished_at
    from message_event p
    where p.tenant_id = ${e.tenantId} and p.session_id = ${e.session_id} and p.event_seq = ${e.event_seq - 1}`;
  return rows[0] ?? null;
}

/** When the message's tenant permit was acquired, while it holds one. */
export async function permitAcquiredAt(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<string | null> {
  const rows = await tx<{ at: string }[]>`
    select ${ts(tx, 'acquired_at')} as at from execution_permit
    where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return rows[0]?.at ?? null;
}

export interface TimelineAuditRow {
  action: string;
  actor_type: string;
  actor_id: string;
  decision: string | null;
  reason: string | null;
  tool_name: string | null;
  latency_ms: number | null;
  error_type: string | null;
  cost_minor: number | null;
  details: Record<string, unknown>;
  occurred_at: string;
  /** model.turn: the usage_event its details name */
  tokens_in: number | null;
  tokens_out: number | null;
}

/**
 * The tenant's audit entries about this message: the worker's (model turns, tool decisions, the
 * terminal transition: same session and event_seq) and the operators' (details.event_id), oldest
 * first, with the usage a model turn recorded.
 */
export async function timelineAudit(
  tx: TransactionSql,
  e: Pick<TimelineEventRow, 'event_id' | 'session_id' | 'event_seq' | 'created_at'> & { tenantId: string },
): Promise<TimelineAuditRow[]> {
  return tx<TimelineAuditRow[]>`
    select a.action, a.actor_type, a.actor_id, a.decision, a.reason, a.tool_name,
           a.latency_ms::int as latency_ms, a.error_type, a.cost_minor::int as cost_minor, a.details,
           ${ts(tx, 'a.occurred_at')} as occurred_at,
           u.tokens_in::int as tokens_in, u.tokens_out::int as tokens_out
    from ${auditEntries(tx)} a
    left join usage_event u on u.tenant_id = a.tenant_id and u.usage_id = a.details ->> 'usage_id'
    where a.tenant_id = ${e.tenantId} and a.occurred_at >= ${e.created_at}::text::timestamptz
      and ((a.session_id = ${e.session_id} and a.event_seq = ${e.event_seq})
           or a.details ->> 'event_id' = ${e.event_id})
    order by a.occurred_at, a.seq nulls last`;
}

export interface TimelineToolRow {
  invocation_id: string;
  tool_name: string;
  status: string;
  attempts: number;
  step: number | null;
  call_ordinal: number | null;
  last_error: string | null;
  provider_receipt_ref: string | null;
  created_at: string;
  dispatched_at: string | null;
  reconciled_at: string | null;
  resolved_at: string | null;
}

export async function timelineTools(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<TimelineToolRow[]> {
  return tx<TimelineToolRow[]>`
    select invocation_id, tool_name, status, attempts, step, call_ordinal, last_error, provider_receipt_ref,
           ${ts(tx, 'created_at')} as created_at, ${ts(tx, 'dispatched_at')} as dispatched_at,
           ${ts(tx, 'reconciled_at')} as reconciled_at, ${ts(tx, 'resolved_at')} as resolved_at
    from tool_invocation where tenant_id = ${tenantId} and event_id = ${eventId}
    order by created_at, invocation_id`;
}

export interface TimelineSegmentRow {
  segment_id: string;
  segment_index: number;
  segment_count: number;
  channel: string;
  status: string;
  attempts: number;
  provider_message_id: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  sent_at: string | null;
}

export async function timelineSegments(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<TimelineSegmentRow[]> {
  return tx<TimelineSegmentRow[]>`
    select segment_id, segment_index, segment_count, channel, status, attempts, provider_message_id,
           last_error, ${ts(tx, 'created_at')} as created_at, ${ts(tx, 'updated_at')} as updated_at,
           ${ts(tx, 'sent_at')} as sent_at
    from reply_outbox where tenant_id = ${tenantId} and event_id = ${eventId}
    order by segment_index`;
}

export async function timelineDeadLetters(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<(DeadLetterRow & { created_us: string })[]> {
  return tx<(DeadLetterRow & { created_us: string })[]>`
    select dead_letter_id, event_id, kind, segment_id, invocation_id, reason_class, detail, status,
           created_at, resolved_at, resolved_by, resolution_reason, ${sortTs(tx, 'created_at')} as sort_ts,
           ${ts(tx, 'created_at')} as created_us
    from dead_letter where tenant_id = ${tenantId} and event_id = ${eventId}
    order by created_at, dead_letter_id`;
}
