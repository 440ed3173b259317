import {
  type Client,
  ScheduleAlreadyRunning,
  type ScheduleOptions,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import type { HousekeepingOptions } from '../activities/housekeeping';
import type { housekeepingWorkflow } from '../workflows/housekeeping';

export const housekeepingScheduleId = (taskQueue: string) => `switchyard-housekeeping-${taskQueue}`;

/**
 * Creates the housekeeping Schedule (audit retention, pruning of the security sink, rate-limit
 * windows and replay guards), or brings an existing one to these settings; its paused state is the
 * operator's and kept. One per task queue; overlapping runs are skipped.
 */
export async function ensureHousekeepingSchedule(
  client: Client,
  s: { taskQueue: string; everySeconds: number; options?: Partial<HousekeepingOptions>; scheduleId?: string },
): Promise<string> {
  const scheduleId = s.scheduleId ?? housekeepingScheduleId(s.taskQueue);
  const action: ScheduleOptionsStartWorkflowAction<typeof housekeepingWorkflow> = {
    type: 'startWorkflow',
    workflowType: 'housekeepingWorkflow',
    workflowId: scheduleId,
    taskQueue: s.taskQueue,
    args: [s.options ?? {}],
    workflowExecutionTimeout: '30 minutes',
  };
  const options: ScheduleOptions<typeof action> = {
    scheduleId,
    spec: { intervals: [{ every: `${s.everySeconds}s` }] },
    action,
    policies: { overlap: 'SKIP', catchupWindow: '1 minute' },
    state: { note: 'Switchyard housekeeping: audit retention, pruning of ingress tables' },
  };
  try {
    await client.schedule.create(options);
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await client.schedule.getHandle(scheduleId).update((prev) => ({
      ...prev,
      spec: options.spec,
      action,
      policies: { ...prev.policies, ...options.policies },
    }));
  }
  return scheduleId;
}
