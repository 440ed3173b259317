import {
  type Client,
  ScheduleAlreadyRunning,
  type ScheduleOptions,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import type { SweepOptions } from '../activities/sweeper';
import type { SweeperInput, sweeperWorkflow } from '../workflows/sweeper';

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
 * (every worker calls this at startup; the Schedule is one per task queue). The Schedule is what an
 * operator sees and pauses in the Web UI; a paused Schedule stops repairs and starts of messages
 * recorded while Temporal was unreachable, nothing else. Overlapping runs are skipped.
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
  const options: ScheduleOptions<typeof action> = {
    scheduleId,
    spec: { intervals: [{ every: `${s.everySeconds}s` }] },
    action,
    policies: { overlap: 'SKIP', catchupWindow: '1 minute' },
    state: {
      note: 'Switchyard repair sweeper: starts unstarted messages, repairs abnormally ended workflows',
    },
  };
  try {
    await client.schedule.create(options);
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    // Settings may have changed since it was created; its paused state is the operator's and kept.
    await client.schedule.getHandle(scheduleId).update((prev) => ({
      ...prev,
      spec: options.spec,
      action,
      policies: { ...prev.policies, ...options.policies },
    }));
  }
  return scheduleId;
}
