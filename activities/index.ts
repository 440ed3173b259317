import { deliveryActivities } from './delivery';
import type { ActivityDeps } from './deps';
import { executionActivities } from './execution';
import { housekeepingActivities } from './housekeeping';
import { modelActivities } from './model';
import { sweeperActivities } from './sweeper';
import { toolActivities } from './tools';

export type { ActivityDeps } from './deps';

/** The one place activities are built; the worker calls it with its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...executionActivities(deps),
    ...modelActivities(deps),
    ...toolActivities(deps),
    ...deliveryActivities(deps),
    ...sweeperActivities(deps),
    ...housekeepingActivities(deps),
  };
}
