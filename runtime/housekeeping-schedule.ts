import type { Client, ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import type { HousekeepingOptions } from '../activities/housekeeping';
import type { housekeepingWorkflow } from '../workflows/housekeeping';
import { upsertSchedule } from './schedules';

export const housekeepingScheduleId = (taskQueue: string) => `switchyard-housekeeping-${taskQueue}`;

/**
 * Creates the housekeeping Schedule (audit and artifact retention, pruning of the security sink, rate-limit
 * windows and replay guards), or brings an existing one to these settings (upsertSchedule).
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
  return upsertSchedule(client, {
    scheduleId,
    spec: { intervals: [{ every: `${s.everySeconds}s` }] },
    action,
    state: { note: 'Switchyard housekeeping: audit retention, pruning of ingress tables' },
  });
}
