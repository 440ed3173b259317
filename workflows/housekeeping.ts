import type { HousekeepingOptions, HousekeepingReport } from '../activities/housekeeping';
import { housekeeping } from './options';

/**
 * One scheduled housekeeping run (runtime/housekeeping-schedule.ts): audit and artifact retention and the
 * pruning of tenant-less ingress tables. Its result says what it removed.
 */
export async function housekeepingWorkflow(
  opts: Partial<HousekeepingOptions> = {},
): Promise<HousekeepingReport> {
  return housekeeping.housekeep(opts);
}
