// The worker's workflow bundle entry: every workflow type the task queue serves.
export { deliveryRetryWorkflow } from './delivery-retry';
export { messageWorkflow } from './message';
export { sweeperWorkflow } from './sweeper';
