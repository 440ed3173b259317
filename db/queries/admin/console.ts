import type { TransactionSql } from 'postgres';
import type { Channel } from '../../../workflows/shared';
import type { BindingStatus } from './bindings';

// The console channel's reads (api/admin/console.ts): the binding a console message is sent to,
// with the tenant's gates, and one conversation (a session of a console binding) in order.

/** A binding with what ingress would know of its tenant (the gates a webhook applies). */
export interface ConsoleTargetRow {
  binding_id: string;
  channel: Channel;
  status: BindingStatus;
  app_id: string;
  config: Record<string, unknown>;
  tenant_status: 'active' | 'suspended' | 'disabled';
  tenant_rate_limit_rpm: number | null;
  tenant_trace_sampling_rate: number;
  tenant_log_masking_level: 'none' | 'basic' | 'strict';
}

export async function getConsoleTarget(
  tx: TransactionSql,
  tenantId: string,
  bindingId: string,
): Promise<ConsoleTargetRow | null> {
  const rows = await tx<ConsoleTargetRow[]>`
    select b.binding_id, b.channel, b.status, b.app_id, b.config, t.status as tenant_status,
           t.rate_limit_rpm as tenant_rate_limit_rpm, t.trace_sampling_rate as tenant_trace_sampling_rate,
           t.log_masking_level as tenant_log_masking_level
    from channel_binding b join tenant t on t.tenant_id = b.tenant_id
    where b.tenant_id = ${tenantId} and b.binding_id = ${bindingId}`;
  return rows[0] ?? null;
}

export async function getMessageStatus(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<string | null> {
  const rows = await tx<{ status: string }[]>`
    select status from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return rows[0]?.status ?? null;
}

/**
 * Where a reader of a conversation stands: the last user message read (`userSeq`), and the
 * messages read whose reply may still grow (`open`: event_seq and the index after the last of its
 * segments read). Segments of one reply are sent in index order.
 */
export interface ConversationPosition {
  userSeq: number;
  open: { seq: number; next: number }[];
}

export interface ConversationItemRow {
  kind: 'user' | 'reply';
  event_id: string;
  event_seq: number;
  /** -1 for a user message */
  segment_index: number;
  text: string | null;
  status: string;
  at: Date;
}

/** The session of a console conversation (null until its first message). */
export async function findConversationSession(
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; identityKey: string },
): Promise<string | null> {
  const rows = await tx<{ session_id: string }[]>`
    select session_id from session
    where tenant_id = ${p.tenantId} and binding_id = ${p.bindingId} and identity_key = ${p.identityKey}`;
  return rows[0]?.session_id ?? null;
}

/**
 * What the reader has not seen after `pos`, in conversation order (a user message, then its sent
 * segments): user messages after userSeq with their sent segments, and the sent segments of the
 * open messages from their `next` index on. At most `limit + 1` rows.
 */
export async function conversationItemsAfter(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; pos: ConversationPosition; limit: number },
): Promise<ConversationItemRow[]> {
  const seqs = p.pos.open.map((o) => o.seq);
  const nexts = p.pos.open.map((o) => o.next);
  return tx<ConversationItemRow[]>`
    select * from (
      select 'user' as kind, e.event_id, e.event_seq::int as event_seq, -1 as segment_index,
             e.payload ->> 'text' as text, e.status, e.created_at as at
      from message_event e
      where e.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId} and e.event_seq > ${p.pos.userSeq}
      union all
      select 'reply', e.event_id, e.event_seq::int, o.segment_index, o.content, o.status, o.sent_at
      from message_event e
      join reply_outbox o on o.tenant_id = e.tenant_id and o.event_id = e.event_id
      where e.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId} and o.status = 'sent'
        and (e.event_seq > ${p.pos.userSeq}
             or exists (select 1 from unnest(${seqs}::int[], ${nexts}::int[]) as w(seq, next)
                        where w.seq = e.event_seq and o.segment_index >= w.next))
    ) items
    order by event_seq, segment_index
    limit ${p.limit + 1}`;
}

/** Per listed message of the session: its status and the highest index of its sent segments. */
export async function conversationProgress(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; seqs: number[] },
): Promise<{ event_seq: number; status: string; last_sent: number | null }[]> {
  return tx<{ event_seq: number; status: string; last_sent: number | null }[]>`
    select e.event_seq::int as event_seq, e.status,
           (select max(o.segment_index) from reply_outbox o
            where o.tenant_id = e.tenant_id and o.event_id = e.event_id and o.status = 'sent') as last_sent
    from message_event e
    where e.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId}
      and e.event_seq = any(${p.seqs}::int[])
    order by e.event_seq`;
}
