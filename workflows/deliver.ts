import { ActivityFailure, getExternalWorkflowHandle, log } from '@temporalio/workflow';
import { bookkeeping, sends } from './options';
import { type DeliveryResult, wakeSignal } from './shared';

/**
 * Sends the segments of one reply strictly in order; stops at the first that does not go out (the
 * rest stay kept for a DLQ retry). A segment whose retries are exhausted is parked in the DLQ.
 */
export async function deliverSegments(
  tenantId: string,
  eventId: string,
  segmentIds: readonly string[],
): Promise<DeliveryResult> {
  let sent = 0;
  for (const segmentId of segmentIds) {
    let result: Awaited<ReturnType<typeof sends.sendReplySegment>>;
    try {
      result = await sends.sendReplySegment({ tenantId, eventId, segmentId });
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      log.warn('segment retries exhausted', { eventId, segmentId });
      result = await bookkeeping.parkSegment({
        tenantId,
        eventId,
        segmentId,
        reasonClass: 'retries_exhausted',
      });
    }
    if (result.status !== 'sent') {
      return {
        sent,
        failure: {
          segmentId,
          reasonClass: result.reasonClass ?? 'delivery_failed',
          deadLettered: result.deadLettered ?? false,
        },
      };
    }
    sent++;
  }
  return { sent, failure: null };
}

/** Best effort: a woken workflow re-checks the database, and polls anyway if a signal is lost. */
export async function wake(workflowIds: readonly string[]): Promise<void> {
  await Promise.all(
    workflowIds.map((id) =>
      getExternalWorkflowHandle(id)
        .signal(wakeSignal)
        .catch(() => undefined),
    ),
  );
}
