import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';

type Activities = ReturnType<typeof createActivities>;

// Activity options by latency class. Transient failures retry with exponential back-off (Temporal
// adds jitter); permanent ones are ApplicationFailure(nonRetryable) thrown by the activity itself.

/** Database bookkeeping: local activities, so they add one marker each to the history, not three events. */
export const bookkeeping = proxyLocalActivities<Activities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * startExecution: bookkeeping, and for a reply it commits at once, the quick attempt at its first
 * segment, hence the longer bound: a WeCom send can take a token fetch, the send, and both again
 * after an expired token (4 × the 10 s send timeout). It stays below the segment's 60 s lease, so a
 * retry never finds the lease expired while the first attempt may still be sending.
 */
export const starts = proxyLocalActivities<Activities>({
  startToCloseTimeout: '50 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * Remote model calls: minutes-long, Retry-After honoured through nextRetryDelay. They heartbeat
 * (activities/model.ts), so a cancellation reaches the call within ~0.8 × the heartbeat timeout
 * (the SDK's heartbeat throttle), and a lost worker's attempt is retried after it, not after 2 minutes.
 */
export const models = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '10 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 5,
    nonRetryableErrorTypes: ['FencedOut', 'PlanDrift', 'ConfigurationError', 'ModelPermanent'],
  },
});

/** Tool dispatch and reconciliation (the same Idempotency-Key on every attempt). */
export const tools = proxyActivities<Activities>({
  // One attempt: claim, dispatch (≤ the send timeout), maybe a receipt lookup (same bound), DB writes.
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 30,
  },
});

/**
 * The first send attempt of a reply's first segment, as a local activity: no task round trip
 * through the server and three history events fewer. One attempt only, and only when the chat is
 * free (it declines a paced one); anything it does not settle (a provider error, a paced chat, a
 * busy segment) is left to `sends`.
 */
export const quickSends = proxyLocalActivities<Activities>({
  startToCloseTimeout: '20 seconds',
  retry: { maximumAttempts: 1 },
});

/** One outbound segment: pacing waits up to 20 s inside the attempt, then the send itself. */
export const sends = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 12,
    nonRetryableErrorTypes: ['FencedOut', 'NotFound'],
  },
});

/** One pass of the repair sweeper: a database scan and a describe per candidate. */
export const sweeps = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '10 seconds',
    maximumAttempts: 3,
  },
});

/** One housekeeping run: bounded deletes; retried a few times, the next run picks up the rest. */
export const housekeeping = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: {
    initialInterval: '5 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 3,
  },
});
