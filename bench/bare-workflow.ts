import { proxyActivities } from '@temporalio/workflow';
import type { bareActivities } from './bare-activities';

// The baseline workflow of bench/e2e.ts: one activity per segment, in order, and nothing else.
const { bareSendSegment } = proxyActivities<ReturnType<typeof bareActivities>>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 12 },
});

export async function bareWorkflow(input: { chatId: string; segments: string[] }): Promise<number> {
  for (const text of input.segments) await bareSendSegment({ chatId: input.chatId, text });
  return input.segments.length;
}
