import { ActivityFailure, getExternalWorkflowHandle, log } from '@temporalio/workflow';
import { bookkeeping, sends } from './options';
import { type DeliveryResult, wakeSignal } from './shared';

/**
 * Sends the segments of one reply strictly in order; stops at the first that does not go out (the
 * rest stay kept for a DLQ retry). A segment whose retries are exhausted is parked in the DLQ. The
 * last segment's send also finishes the message with its receipt (one activity, no extra step).
 */
export async function deliverSegments(
  tenantId: string,
  eventId: string,
  segmentIds: readonly string[],
): Promise<DeliveryResult> {
  let sent = 0;
  let finished: DeliveryResult['finished'] = null;
  for (const [i, segmentId] of segmentIds.entries()) {
    let result: Awaited<ReturnType<typeof sends.sendReplySegment>>;
    try {
      const finish = i === segmentIds.length - 1;
      result = await sends.sendReplySegment({ tenantId, eventId, segmentId, finish });
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
        finished: null,
        failure: {
          segmentId,
          reasonClass: result.reasonClass ?? 'delivery_failed',
          deadLettered: result.deadLettered ?? false,
        },
      };
    }
    sent++;
    finished = result.finished ?? null;
  }
  return { sent, finished, failure: null };
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
