import { type SweepOptions, type SweepReport, sweeperActivities } from '../../activities/sweeper';
import type { Harness } from './harness';

/**
 * One repair-sweeper pass, as the scheduled sweeper workflow runs it, scoped to these tenants
 * (test files share one database, and each has its own task queue).
 */
export function sweepNow(
  h: Harness,
  tenantIds: string[],
  options: Partial<SweepOptions> = {},
): Promise<SweepReport> {
  const { sweep } = sweeperActivities({
    sql: h.sql,
    secrets: h.secrets,
    log: h.appDeps.log,
    suspendedReply: 'This service is temporarily unavailable.',
    workerId: 'test-sweeper',
    sendTimeoutMs: 2000,
    temporal: h.temporal,
    taskQueue: h.taskQueue,
  });
  return sweep({ unstartedSeconds: 0, ...options, tenantIds });
}
