import type { TransactionSql } from 'postgres';

export interface RetryPlan {
  eventId: string;
  segmentIds: string[];
}

/**
 * Reopens a dead-lettered delivery for an operator's retry, in the caller's transaction: the dead
 * letter open → retried, the message failed → reply_pending, and every unsent segment of its
 * pinned reply (failed / unknown) → retryable. Returns 'not_found' or 'invalid_transition' when the dead letter is not an open
 * segment letter of this tenant: 'not_found' / 'invalid_transition' (the caller answers 404 / 409).
 */
export async function reopenForRetry(
  tx: TransactionSql,
  p: { tenantId: string; deadLetterId: string; actor: string; reason: string | null },
): Promise<RetryPlan | 'not_found' | 'invalid_transition'> {
  const [dl] = await tx<{ event_id: string; kind: string; status: string }[]>`
    select event_id, kind, status from dead_letter
    where tenant_id = ${p.tenantId} and dead_letter_id = ${p.deadLetterId} for update`;
  if (!dl) return 'not_found';
  if (dl.status !== 'open' || dl.kind !== 'segment') return 'invalid_transition';
  const [ev] = await tx<{ status: string; reply_id: string | null }[]>`
    select status, reply_id from message_event where tenant_id = ${p.tenantId} and event_id = ${dl.event_id} for update`;
  // Only a finished (failed) delivery reopens: a live run still owns a reply_pending message.
  if (!ev?.reply_id || ev.status !== 'failed') return 'invalid_transition';
  await tx`
    update dead_letter set status = 'retried', resolved_at = now(), resolved_by = ${p.actor}, resolution_reason = ${p.reason}
    where tenant_id = ${p.tenantId} and dead_letter_id = ${p.deadLetterId}`;
  await tx`
    update message_event
    set status = 'reply_pending', failure_reason = null, updated_at = now(),
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
