import { proxyActivities, sleep } from '@temporalio/workflow';
import type { bareActivities } from './bare-activities';

// The baseline workflow of bench/e2e.ts: one activity per segment, in order, and nothing else.
const { bareSendSegment } = proxyActivities<ReturnType<typeof bareActivities>>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 12 },
});

/**
 * `intervalMs`: the least a workflow must wait between two messages to one chat to stay within the
 * provider's per-chat limit (a durable timer); the paced baseline waits what our delivery paces.
 */
export async function bareWorkflow(input: {
  chatId: string;
  segments: string[];
  intervalMs?: number;
}): Promise<number> {
  for (const [i, text] of input.segments.entries()) {
    if (i > 0 && input.intervalMs) await sleep(input.intervalMs);
    await bareSendSegment({ chatId: input.chatId, text });
  }
  return input.segments.length;
}
