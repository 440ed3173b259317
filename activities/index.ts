import { deliveryActivities } from './delivery';
import type { ActivityDeps } from './deps';
import { executionActivities } from './execution';

export type { ActivityDeps } from './deps';

/** The one place activities are built; the worker calls it with its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...executionActivities(deps),
    ...deliveryActivities(deps),
  };
}
