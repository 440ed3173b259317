import { deliverSegments, finishDelivery } from './deliver';
import type { DeliveryWorkflowInput, MessageWorkflowResult } from './shared';

/**
 * An operator's DLQ retry: a new delivery run of the segments the failed run kept, in order, and
 * the message's terminal transition again (replied only when every segment is sent). The admin API
 * reopened the message (failed → reply_pending) and the segments in the same transaction that
 * marked the dead letter retried.
 */
export async function deliveryRetryWorkflow(input: DeliveryWorkflowInput): Promise<MessageWorkflowResult> {
  const { tenantId, eventId } = input;
  const delivery = await deliverSegments(tenantId, eventId, input.segmentIds);
  const done = await finishDelivery(tenantId, eventId, delivery);
  return {
    status: done.status,
    outcome: delivery.failure ? 'delivery_failed' : null,
    replyId: null,
    segmentsSent: delivery.sent,
  };
}
