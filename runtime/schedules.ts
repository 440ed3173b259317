import { type Client, ScheduleAlreadyRunning, type ScheduleOptions } from '@temporalio/client';

/**
 * Creates a Schedule, or brings an existing one to these settings (every worker calls this at
 * startup; one Schedule per task queue). Its paused state is the operator's and kept; overlapping
 * runs are skipped and at most a minute is caught up.
 */
export async function upsertSchedule(client: Client, options: ScheduleOptions): Promise<string> {
  const policies: ScheduleOptions['policies'] = {
    overlap: 'SKIP',
    catchupWindow: '1 minute',
    ...options.policies,
  };
  try {
    await client.schedule.create({ ...options, policies });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await client.schedule.getHandle(options.scheduleId).update((prev) => ({
      ...prev,
      spec: options.spec,
      action: options.action,
      policies: { ...prev.policies, ...policies },
    }));
  }
  return options.scheduleId;
}
