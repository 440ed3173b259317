import type { TransactionSql } from 'postgres';

export interface RetryPlan {
  eventId: string;
  segmentIds: string[];
}

/**
 * Another message of the same session that has not finished: a retry now would interleave the
 * chat — a later one still being answered, or an earlier one reopened by another retry.
 */
export interface LaterPending {
  kind: 'later_pending' | 'earlier_pending';
  eventId: string;
  eventSeq: number;
  status: string;
}

/** The session's nearest unfinished message after (else before) this one: a retry's chat-order check. */
export async function unfinishedNeighbour(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<LaterPending | null> {
  const [n] = await tx<{ event_id: string; event_seq: number; status: string; later: boolean }[]>`
    select n.event_id, n.event_seq, n.status, n.event_seq > e.event_seq as later from message_event e
    join message_event n on n.tenant_id = e.tenant_id and n.session_id = e.session_id and n.event_seq <> e.event_seq
    where e.tenant_id = ${tenantId} and e.event_id = ${eventId} and n.status not in ('replied', 'failed')
    order by n.event_seq > e.event_seq desc, n.event_seq limit 1`;
  if (!n) return null;
  return {
    kind: n.later ? 'later_pending' : 'earlier_pending',
    eventId: n.event_id,
    eventSeq: Number(n.event_seq),
    status: n.status,
  };
}

/**
 * Reopens a dead-lettered delivery for an operator's retry, in the caller's transaction: the dead
 * letter open → retried, the message failed → reply_pending (its workflow id now the retry run's,
 * which the sweeper then watches), and every unsent segment of its pinned reply (failed / unknown)
 * → retryable. Refused while another message of the session is unfinished (its reply would be
 * interleaved with this one's): the LaterPending. 'not_found' / 'invalid_transition' when the dead
 * letter is not an open segment letter of this tenant (the caller answers 404 / 409).
 */
export async function reopenForRetry(
  tx: TransactionSql,
  p: { tenantId: string; deadLetterId: string; actor: string; reason: string | null; workflowId: string },
): Promise<RetryPlan | LaterPending | 'not_found' | 'invalid_transition'> {
  const [dl] = await tx<{ event_id: string; kind: string; status: string }[]>`
    select event_id, kind, status from dead_letter
    where tenant_id = ${p.tenantId} and dead_letter_id = ${p.deadLetterId} for update`;
  if (!dl) return 'not_found';
  if (dl.status !== 'open' || dl.kind !== 'segment') return 'invalid_transition';
  const [ev] = await tx<{ status: string; reply_id: string | null; session_id: string }[]>`
    select status, reply_id, session_id from message_event
    where tenant_id = ${p.tenantId} and event_id = ${dl.event_id} for update`;
  // Only a finished (failed) delivery reopens: a live run still owns a reply_pending message.
  if (!ev?.reply_id || ev.status !== 'failed') return 'invalid_transition';
  // One retry per session at a time (message_repair_begin takes the same lock): two concurrent
  // retries of one chat would each see the other still failed.
  await tx`select pg_advisory_xact_lock(hashtextextended(${`session:${p.tenantId}:${ev.session_id}`}, 0))`;
  const later = await unfinishedNeighbour(tx, p.tenantId, dl.event_id);
  if (later) return later;
  await tx`
    update dead_letter set status = 'retried', resolved_at = now(), resolved_by = ${p.actor}, resolution_reason = ${p.reason}
    where tenant_id = ${p.tenantId} and dead_letter_id = ${p.deadLetterId}`;
  await tx`
    update message_event
    set status = 'reply_pending', failure_reason = null, updated_at = now(), workflow_id = ${p.workflowId},
        sweep_checked_at = null,
        outcome = case when outcome = 'delivery_failed' then null else outcome end
    where tenant_id = ${p.tenantId} and event_id = ${dl.event_id}`;
  // Exactly the segments reopened here, in reply order (a discarded or still-leased segment is not
  // handed to the retry run, which would only see it as failed or busy).
  const segments = await tx<{ segment_id: string; segment_index: number }[]>`
    update reply_outbox set status = 'retryable', lease_expires_at = null, next_attempt_at = null, updated_at = now()
    where tenant_id = ${p.tenantId} and reply_id = ${ev.reply_id} and status in ('failed', 'unknown', 'retryable', 'pending')
    returning segment_id, segment_index`;
  segments.sort((a, b) => a.segment_index - b.segment_index);
  return { eventId: dl.event_id, segmentIds: segments.map((s) => s.segment_id) };
}
