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
  /** where the tenant's artifacts go (console uploads are stored before the message is recorded) */
  tenant_default_backend_profile_id: string | null;
}

export async function getConsoleTarget(
  tx: TransactionSql,
  tenantId: string,
  bindingId: string,
): Promise<ConsoleTargetRow | null> {
  const rows = await tx<ConsoleTargetRow[]>`
    select b.binding_id, b.channel, b.status, b.app_id, b.config, t.status as tenant_status,
           t.rate_limit_rpm as tenant_rate_limit_rpm, t.trace_sampling_rate as tenant_trace_sampling_rate,
           t.log_masking_level as tenant_log_masking_level,
           t.default_backend_profile_id as tenant_default_backend_profile_id
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
 * Where a reader of a conversation stands: the last user message read (`userSeq`: event_seq, taken
 * under the session's lock at record, so in commit order), the last reply segment read (`sentSeq`:
 * reply_outbox.sent_seq, in commit order per conversation: migration 0033), and the messages read
 * whose status may still change, with the status the reader was last told (`watch`).
 */
export interface ConversationPosition {
  userSeq: number;
  sentSeq: number;
  watch: { seq: number; status: string }[];
}

export interface UserItemRow {
  kind: 'user';
  event_id: string;
  event_seq: number;
  /** the text, or a media message's caption */
  text: string | null;
  /** a media message's attachments as uploaded (console uploads), null for none */
  attachments: { file_name: string | null; content_type: string | null; size_bytes: number | null }[] | null;
  status: string;
  at: Date;
}

export interface ReplyItemRow {
  kind: 'reply';
  event_id: string;
  event_seq: number;
  segment_index: number;
  sent_seq: number;
  text: string;
  status: string;
  at: Date;
}

export type ConversationItemRow = UserItemRow | ReplyItemRow;

/** A user item's columns, from its message event `e`. */
const userColumns = (tx: TransactionSql) => tx`
  'user' as kind, e.event_id, e.event_seq::int as event_seq,
  coalesce(e.payload ->> 'text', e.payload ->> 'caption') as text,
  (select jsonb_agg(jsonb_build_object('file_name', m ->> 'fileName', 'content_type', m ->> 'mimeType',
                                       'size_bytes', (m ->> 'sizeBytes')::bigint) order by i)
   from jsonb_array_elements(case when jsonb_typeof(e.payload -> 'media') = 'array'
                                  then e.payload -> 'media' else '[]'::jsonb end) with ordinality as x(m, i)
  ) as attachments,
  e.status, e.created_at as at`;

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

/** User messages of the session after `afterSeq`, in event_seq order, at most `limit`. */
export async function conversationUsersAfter(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; afterSeq: number; limit: number },
): Promise<UserItemRow[]> {
  return tx<UserItemRow[]>`
    select ${userColumns(tx)}
    from message_event e
    where e.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId} and e.event_seq > ${p.afterSeq}
    order by e.event_seq
    limit ${p.limit}`;
}

/** Sent reply segments of the session after `afterSentSeq`, in the order they were sent, at most `limit`. */
export async function conversationRepliesAfter(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; afterSentSeq: number; limit: number },
): Promise<ReplyItemRow[]> {
  return tx<ReplyItemRow[]>`
    select 'reply' as kind, e.event_id, e.event_seq::int as event_seq, o.segment_index,
           -- sent_seq is a bigint: exact as a JS number below 2^53
           o.sent_seq::float8 as sent_seq, o.content as text, o.status, o.sent_at as at
    from reply_outbox o
    join message_event e on e.tenant_id = o.tenant_id and e.event_id = o.event_id
    where o.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId} and o.status = 'sent'
      and o.sent_seq > ${p.afterSentSeq}
    order by o.sent_seq
    limit ${p.limit}`;
}

/** The listed user messages of the session as they are now (their current status). */
export async function conversationUsersBySeq(
  tx: TransactionSql,
  p: { tenantId: string; sessionId: string; seqs: number[] },
): Promise<UserItemRow[]> {
  if (p.seqs.length === 0) return [];
  return tx<UserItemRow[]>`
    select ${userColumns(tx)}
    from message_event e
    where e.tenant_id = ${p.tenantId} and e.session_id = ${p.sessionId}
      and e.event_seq = any(${p.seqs}::int[])
    order by e.event_seq`;
}

/**
 * Whether the console message `eventId` already has its `console.message` audit entry. Called
 * under consoleAuditLock, so two sends of one message cannot both find it missing. An entry is
 * never older than its message, which bounds the scan of the tenant's (tenant, occurred_at) index.
 */
export async function consoleMessageAudited(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string },
): Promise<boolean> {
  const rows = await tx<{ found: boolean }[]>`
    select exists (
      select 1 from audit_log a
      where a.tenant_id = ${p.tenantId} and a.action = 'console.message'
        and a.occurred_at >= (select e.created_at from message_event e
                              where e.tenant_id = ${p.tenantId} and e.event_id = ${p.eventId})
        and a.details ->> 'event_id' = ${p.eventId}
    ) as found`;
  return rows[0]?.found ?? false;
}

/** Serialises the audit of one console message until the transaction ends. */
export async function consoleAuditLock(tx: TransactionSql, p: { tenantId: string; eventId: string }) {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`console_audit:${p.tenantId}:${p.eventId}`}, 0))`;
}
