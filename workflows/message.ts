import { log, proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import {
  type MessageStatus,
  type MessageWorkflowInput,
  type MessageWorkflowResult,
  SA_STATUS,
} from './shared';

type Activities = ReturnType<typeof createActivities>;

// Activity options by latency class. Transient failures retry with exponential back-off;
// permanent ones are ApplicationFailure(nonRetryable) thrown by the activity itself.
const bookkeeping = proxyActivities<Activities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});
const model = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 6,
  },
});
const delivery = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 12,
  },
});

/**
 * One inbound message, end to end: claim the execution, run the agent and commit the pinned reply
 * with its outbox segments, send the segments in order, then mark the message replied.
 */
export async function messageWorkflow(input: MessageWorkflowInput): Promise<MessageWorkflowResult> {
  const { tenantId, eventId } = input;
  const setStatus = (status: MessageStatus) => upsertSearchAttributes([{ key: SA_STATUS, value: status }]);

  const start = await bookkeeping.startExecution({ tenantId, eventId });
  if (start.kind === 'finished') {
    setStatus(start.status);
    return { status: start.status, outcome: start.outcome, replyId: null, segmentsSent: 0 };
  }
  setStatus('running');

  const reply = await model.executeAndCommitReply({
    tenantId,
    eventId,
    plan: start.plan,
    fallback: start.fallback,
  });
  setStatus(reply.status);
  if (reply.status !== 'reply_pending') {
    return { status: reply.status, outcome: reply.outcome, replyId: reply.replyId, segmentsSent: 0 };
  }

  let sent = 0;
  for (const segmentId of reply.segmentIds) {
    const result = await delivery.sendReplySegment({ tenantId, eventId, segmentId });
    if (result.status !== 'sent') {
      log.warn('segment not delivered', { eventId, segmentId, status: result.status });
      const failed = await bookkeeping.failMessage({
        tenantId,
        eventId,
        reason: result.reasonClass ?? 'delivery_failed',
      });
      setStatus(failed.status);
      return { status: failed.status, outcome: failed.outcome, replyId: reply.replyId, segmentsSent: sent };
    }
    sent++;
  }

  const done = await bookkeeping.completeReply({ tenantId, eventId });
  setStatus(done.status);
  return { status: done.status, outcome: reply.outcome, replyId: reply.replyId, segmentsSent: sent };
}
