// The worker's workflow bundle entry: every workflow type the task queue serves.
export { messageWorkflow } from './message';
