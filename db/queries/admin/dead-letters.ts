import type { TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type DeadLetterStatus = 'open' | 'retried' | 'discarded';

export interface DeadLetterRow {
  dead_letter_id: string;
  event_id: string;
  kind: 'execution' | 'segment' | 'tool';
  segment_id: string | null;
  invocation_id: string | null;
  reason_class: string;
  detail: Record<string, unknown>;
  status: DeadLetterStatus;
  created_at: Date;
  resolved_at: Date | null;
  resolved_by: string | null;
  resolution_reason: string | null;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  dead_letter_id, event_id, kind, segment_id, invocation_id, reason_class, detail, status, created_at,
  resolved_at, resolved_by, resolution_reason, ${sortTs(tx, 'created_at')} as sort_ts`;

export async function listDeadLetters(
  tx: TransactionSql,
  p: { tenantId: string; status?: DeadLetterStatus; kind?: string } & PageParams,
): Promise<Page<DeadLetterRow>> {
  const rows = await tx<DeadLetterRow[]>`
    select ${columns(tx)} from dead_letter
    where tenant_id = ${p.tenantId}
      ${p.status === undefined ? tx`` : tx`and status = ${p.status}`}
      ${p.kind === undefined ? tx`` : tx`and kind = ${p.kind}`}
      ${keysetAfter(tx, p.cursor, 'created_at', 'dead_letter_id')}
    order by created_at desc, dead_letter_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.dead_letter_id }));
}

export async function getDeadLetter(
  tx: TransactionSql,
  tenantId: string,
  deadLetterId: string,
): Promise<DeadLetterRow | null> {
  const rows = await tx<DeadLetterRow[]>`
    select ${columns(tx)} from dead_letter where tenant_id = ${tenantId} and dead_letter_id = ${deadLetterId}`;
  return rows[0] ?? null;
}

/** open → discarded; null when the dead letter was not open (or does not exist). */
export async function discardDeadLetter(
  tx: TransactionSql,
  p: { tenantId: string; deadLetterId: string; resolvedBy: string; reason: string },
): Promise<DeadLetterRow | null> {
  const [row] = await tx<DeadLetterRow[]>`
    update dead_letter set status = 'discarded', resolved_at = now(), resolved_by = ${p.resolvedBy},
                           resolution_reason = ${p.reason}
    where tenant_id = ${p.tenantId} and dead_letter_id = ${p.deadLetterId} and status = 'open'
    returning ${columns(tx)}`;
  return row ?? null;
}

/**
 * For a dead letter already marked retried: the segments its message still has to deliver, when
 * the message is still waiting for that delivery (reply_pending); null otherwise. Lets an
 * operator start a retry's delivery run whose start failed after the reopen committed.
 */
export async function unsentSegmentsOfRetry(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
  /** the retry's own run: a message the sweeper has handed to a repair run since is not restarted */
  workflowId: string,
): Promise<string[] | null> {
  const [ev] = await tx<{ status: string; reply_id: string | null; workflow_id: string | null }[]>`
    select status, reply_id, workflow_id from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
  if (!ev?.reply_id || ev.status !== 'reply_pending' || ev.workflow_id !== workflowId) return null;
  const rows = await tx<{ segment_id: string }[]>`
    select segment_id from reply_outbox
    where tenant_id = ${tenantId} and reply_id = ${ev.reply_id} and status <> 'sent'
    order by segment_index`;
  return rows.map((r) => r.segment_id);
}
