import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';
import { testLoginUrl } from './db-logins';
import { TEST_MASTER_KEY } from './harness';

export interface WorkerProcess {
  readonly pid: number;
  kill(signal: NodeJS.Signals): Promise<void>;
}

/** Starts tests/helpers/worker-main.ts in a child process on the given task queue. */
export async function startWorkerProcess(
  taskQueue: string,
  extraEnv: Record<string, string> = {},
): Promise<WorkerProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, 'worker-main.ts')],
    {
      env: {
        ...process.env,
        TEST_DATABASE_URL: testLoginUrl(inject('databaseUrl'), 'worker'),
        TEST_TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEST_WORKFLOW_BUNDLE: inject('workflowBundlePath'),
        TEST_TASK_QUEUE: taskQueue,
        TEST_MASTER_KEY,
        ...extraEnv,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('worker process did not start in 60 s')), 60_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`worker process exited with ${code}`)));
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    pid: child.pid!,
    async kill(signal) {
      if (child.exitCode === null) child.kill(signal);
      await exited;
    },
  };
}
