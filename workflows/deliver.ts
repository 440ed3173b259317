import {
  ActivityFailure,
  ApplicationFailure,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { bookkeeping, quickSends, sends } from './options';
import { type DeliveryResult, type MessageStatus, SA_STATUS, wakeSignal } from './shared';

/**
 * Sends the segments of one reply strictly in order; stops at the first that does not go out (the
 * rest stay kept for a DLQ retry). A segment whose retries are exhausted is parked in the DLQ. The
 * last segment's send also finishes the message with its receipt (one activity, no extra step).
 * `firstSend`: the quick attempt at the first segment made by the activity that committed the
 * reply (startExecution) — its result, or null when it did not settle it; absent: not made yet.
 */
export async function deliverSegments(
  tenantId: string,
  eventId: string,
  segmentIds: readonly string[],
  firstSend?: SegmentResult | null,
): Promise<DeliveryResult> {
  let sent = 0;
  let finished: DeliveryResult['finished'] = null;
  for (const [i, segmentId] of segmentIds.entries()) {
    const input = { tenantId, eventId, segmentId, finish: i === segmentIds.length - 1 };
    // Only a reply's first segment can find its chat free: the next ones are paced behind it
    // (≥ 1.1 s), which the quick attempt would decline, so they go to the regular activity at once.
    const quick = i > 0 ? null : firstSend !== undefined ? firstSend : await quickAttempt(input);
    const result = quick ?? (await regularAttempts(input));
    if (result.status !== 'sent') return { sent, finished: null, failure: failureOf(segmentId, result) };
    sent++;
    finished = result.finished ?? null;
  }
  return { sent, finished, failure: null };
}

/**
 * deliverSegments' result, known without an activity, when the committing activity's quick send
 * settled a one-segment reply (the scripted common case); null when a segment is left to send.
 * Synchronous, so that path makes no promise (see wake).
 */
export function settledByFirstSend(
  segmentIds: readonly string[],
  firstSend: SegmentResult | null | undefined,
): DeliveryResult | null {
  const [segmentId, ...rest] = segmentIds;
  if (segmentId === undefined || rest.length > 0 || !firstSend) return null;
  return firstSend.status === 'sent'
    ? { sent: 1, finished: firstSend.finished ?? null, failure: null }
    : { sent: 0, finished: null, failure: failureOf(segmentId, firstSend) };
}

function failureOf(segmentId: string, result: SegmentResult): NonNullable<DeliveryResult['failure']> {
  return {
    segmentId,
    reasonClass: result.reasonClass ?? 'delivery_failed',
    deadLettered: result.deadLettered ?? false,
  };
}

type SegmentInput = { tenantId: string; eventId: string; segmentId: string; finish: boolean };
type SegmentResult = Awaited<ReturnType<typeof sends.sendReplySegment>>;

/** The quick first attempt (a local activity); null when it did not settle the segment. */
async function quickAttempt(input: SegmentInput): Promise<SegmentResult | null> {
  try {
    return await quickSends.sendReplySegment({ ...input, quick: true });
  } catch (err) {
    if (!failedAttempt(err)) throw err;
    // It recorded what happened (retryable, unknown → resend allowed, or nothing when it declined
    // or its worker died): the regular attempts continue from there.
    return null;
  }
}

/** The regular activity with its retry policy; a segment whose retries run out is parked in the DLQ. */
async function regularAttempts(input: SegmentInput): Promise<SegmentResult> {
  try {
    return await sends.sendReplySegment(input);
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    log.warn('segment retries exhausted', { eventId: input.eventId, segmentId: input.segmentId });
    const { tenantId, eventId, segmentId } = input;
    return bookkeeping.parkSegment({ tenantId, eventId, segmentId, reasonClass: 'retries_exhausted' });
  }
}

/** A failed (local) activity attempt; a cancellation or a workflow bug propagates. */
function failedAttempt(err: unknown): boolean {
  if (isCancellation(err)) return false;
  return err instanceof ActivityFailure || err instanceof ApplicationFailure || err instanceof TimeoutFailure;
}

/**
 * After a delivery run: the message's terminal transition (made by the last segment's receipt, or
 * here when the run failed or had nothing to send), its final status as the search attribute, and
 * the session's next message woken. Shared by the message workflow and the DLQ retry.
 */
export async function finishDelivery(
  tenantId: string,
  eventId: string,
  delivery: DeliveryResult,
): Promise<{ status: MessageStatus; wake: string[] }> {
  const done =
    delivery.finished ??
    (await bookkeeping.finishMessage({
      tenantId,
      eventId,
      failure: delivery.failure
        ? { outcome: 'delivery_failed', reason: delivery.failure.reasonClass }
        : undefined,
    }));
  upsertSearchAttributes([{ key: SA_STATUS, value: done.status }]);
  if (done.wake.length > 0) await wake(done.wake);
  return done;
}

/**
 * finishDelivery without a promise (see wake) when the last segment's receipt finished the message
 * and nobody is to be woken: the same search attribute; null otherwise.
 */
export function finishedWithoutWaiting(
  delivery: DeliveryResult,
): { status: MessageStatus; wake: string[] } | null {
  const done = delivery.finished;
  if (done === null || done.wake.length > 0) return null;
  upsertSearchAttributes([{ key: SA_STATUS, value: done.status }]);
  return done;
}

/**
 * Best effort: a woken workflow re-checks the database, and polls anyway if a signal is lost.
 * Callers on a message's common path skip it for an empty list: in the workflow sandbox every
 * promise (an async call, an await, Promise.all) costs a stack capture by the SDK's stack-trace
 * hook, and a call with nobody to wake makes four of them for nothing.
 */
export async function wake(workflowIds: readonly string[]): Promise<void> {
  await Promise.all(
    workflowIds.map((id) =>
      getExternalWorkflowHandle(id)
        .signal(wakeSignal)
        .catch(() => undefined),
    ),
  );
}
