// The worker's workflow bundle entry: every workflow type the task queue serves.
export { deliveryRetryWorkflow } from './delivery-retry';
export { housekeepingWorkflow } from './housekeeping';
export { messageWorkflow } from './message';
export { sweeperWorkflow } from './sweeper';
