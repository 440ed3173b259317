import { fileURLToPath } from 'node:url';
import { type NativeConnection, Worker } from '@temporalio/worker';
import { type ActivityDeps, createActivities } from '../activities';

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** Pre-built workflow bundle (tests share one to save the webpack step). */
  workflowBundle?: { code: string };
  maxConcurrentActivityTaskExecutions?: number;
}

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

/** Builds a worker that serves every workflow and activity of Switchyard on one task queue. */
export function createWorker(opts: WorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    activities: createActivities(opts.deps),
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : { workflowsPath }),
    maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivityTaskExecutions ?? 50,
    // Graceful drain on SIGTERM: running activities get this long to finish.
    shutdownGraceTime: '20 seconds',
  });
}
