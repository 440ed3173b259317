import type { TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';
import { type ToolInvocationRow, toolInvocationColumns } from './tool-invocations';

export interface MessageRow {
  event_id: string;
  session_id: string;
  binding_id: string;
  event_seq: number;
  kind: string;
  status: string;
  outcome: string | null;
  failure_reason: string | null;
  reply_id: string | null;
  segment_count: number | null;
  /** the event whose turn answered this message (conversation policy collect / interrupt) */
  merged_into: string | null;
  workflow_id: string | null;
  request_id: string;
  trace_id: string | null;
  execution_attempts: number;
  created_at: Date;
  committed_at: Date | null;
  updated_at: Date;
  sort_ts: string;
}

export interface MessageDetailRow extends MessageRow {
  repair_count: number;
  payload: Record<string, unknown>;
  execution_plan: Record<string, unknown> | null;
}

export interface SegmentRow {
  segment_id: string;
  segment_index: number;
  segment_count: number;
  status: string;
  attempts: number;
  provider_message_id: string | null;
  last_error: string | null;
  content: string;
  created_at: Date;
  sent_at: Date | null;
}

const columns = (tx: TransactionSql) => tx`
  event_id, session_id, binding_id, event_seq, kind, status, outcome, failure_reason, reply_id,
  segment_count, merged_into, workflow_id, request_id, trace_id, execution_attempts, created_at, committed_at,
  updated_at, ${sortTs(tx, 'created_at')} as sort_ts`;

export async function listMessages(
  tx: TransactionSql,
  p: {
    tenantId: string;
    status?: string;
    sessionId?: string;
    /** the channel of the message's binding */
    channel?: string;
    /** received at or after / before (ISO 8601) */
    receivedFrom?: string;
    receivedBefore?: string;
  } & PageParams,
): Promise<Page<MessageRow>> {
  const rows = await tx<MessageRow[]>`
    select ${columns(tx)} from message_event
    where tenant_id = ${p.tenantId}
      ${p.status === undefined ? tx`` : tx`and status = ${p.status}`}
      ${p.sessionId === undefined ? tx`` : tx`and session_id = ${p.sessionId}`}
      ${
        p.channel === undefined
          ? tx``
          : tx`and binding_id in (select binding_id from channel_binding
                                  where tenant_id = ${p.tenantId} and channel = ${p.channel})`
      }
      ${p.receivedFrom === undefined ? tx`` : tx`and created_at >= ${p.receivedFrom}::timestamptz`}
      ${p.receivedBefore === undefined ? tx`` : tx`and created_at < ${p.receivedBefore}::timestamptz`}
      ${keysetAfter(tx, p.cursor, 'created_at', 'event_id')}
    order by created_at desc, event_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.event_id }));
}

export async function getMessage(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<{ event: MessageDetailRow; invocations: ToolInvocationRow[]; segments: SegmentRow[] } | null> {
  const [event] = await tx<MessageDetailRow[]>`
    select ${columns(tx)}, repair_count, payload, execution_plan from message_event
    where tenant_id = ${tenantId} and event_id = ${eventId}`;
  if (!event) return null;
  const invocations = await tx<ToolInvocationRow[]>`
    select ${toolInvocationColumns(tx)} from tool_invocation
    where tenant_id = ${tenantId} and event_id = ${eventId} order by created_at, invocation_id`;
  const segments = await tx<SegmentRow[]>`
    select segment_id, segment_index, segment_count, status, attempts, provider_message_id, last_error,
           content, created_at, sent_at
    from reply_outbox where tenant_id = ${tenantId} and event_id = ${eventId}
    order by reply_id, segment_index`;
  return { event, invocations, segments };
}
