import type { Client, ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import type { SweepOptions } from '../activities/sweeper';
import type { SweeperInput, sweeperWorkflow } from '../workflows/sweeper';
import { upsertSchedule } from './schedules';

export interface SweeperScheduleSettings {
  taskQueue: string;
  /** The Schedule's interval: each action is one sweeper run of this length. */
  everySeconds: number;
  /** Pause between passes inside a run. */
  passSeconds: number;
  options: Partial<SweepOptions>;
  /** Schedule id (default `switchyard-sweeper-<task queue>`). */
  scheduleId?: string;
}

export const sweeperScheduleId = (taskQueue: string) => `switchyard-sweeper-${taskQueue}`;

/**
 * Creates the repair sweeper's Temporal Schedule, or brings an existing one to these settings
 * (upsertSchedule). The Schedule is what an operator sees and pauses in the Web UI; a paused
 * Schedule stops repairs and starts of messages recorded while Temporal was unreachable, nothing
 * else.
 */
export async function ensureSweeperSchedule(client: Client, s: SweeperScheduleSettings): Promise<string> {
  const scheduleId = s.scheduleId ?? sweeperScheduleId(s.taskQueue);
  const input: SweeperInput = {
    runForMs: s.everySeconds * 1000,
    passIntervalMs: s.passSeconds * 1000,
    options: s.options,
  };
  const action: ScheduleOptionsStartWorkflowAction<typeof sweeperWorkflow> = {
    type: 'startWorkflow',
    workflowType: 'sweeperWorkflow',
    workflowId: scheduleId,
    taskQueue: s.taskQueue,
    args: [input],
    workflowExecutionTimeout: `${s.everySeconds * 3}s`,
  };
  return upsertSchedule(client, {
    scheduleId,
    spec: { intervals: [{ every: `${s.everySeconds}s` }] },
    action,
    state: {
      note: 'Switchyard repair sweeper: starts unstarted messages, repairs abnormally ended workflows',
    },
  });
}
