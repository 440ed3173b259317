import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { inject } from 'vitest';
import type { ActivityDeps } from '../../activities';
import { newApp } from '../../api/app';
import type { AppDeps } from '../../api/deps';
import { createSql, type Sql } from '../../db/client';
import { createLogger } from '../../lib/log';
import { createSecretBox, type SecretBox } from '../../lib/secret-box';
import { createWorker } from '../../runtime/worker';

// A fixed test master key: secrets sealed by one test file open in another.
export const TEST_MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
export const TEST_ADMIN_TOKEN = 'test-platform-token-0123456789abcdef';

export interface Harness {
  sql: Sql;
  temporal: Client;
  nativeConnection: NativeConnection;
  secrets: SecretBox;
  taskQueue: string;
  app: ReturnType<typeof newApp>;
  appDeps: AppDeps;
  startWorker(overrides?: Partial<ActivityDeps>): Promise<{ worker: Worker; stop(): Promise<void> }>;
  close(): Promise<void>;
}

let counter = 0;

/**
 * Connects to the suite's PostgreSQL (or `databaseUrl`: a test's private one) and Temporal; each
 * harness gets its own task queue.
 */
export async function createHarness(
  opts: { taskQueue?: string; databaseUrl?: string } = {},
): Promise<Harness> {
  const sql = createSql(opts.databaseUrl ?? inject('databaseUrl'), { max: 10 });
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  const temporal = new Client({ connection, namespace: 'default' });
  const nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const secrets = createSecretBox(TEST_MASTER_KEY);
  const log = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const taskQueue = opts.taskQueue ?? `test-${process.pid}-${Date.now()}-${counter++}`;
  const appDeps: AppDeps = {
    sql,
    temporal,
    taskQueue,
    secrets,
    log,
    metrics: new Registry(),
    adminToken: TEST_ADMIN_TOKEN,
    temporalUiUrl: 'http://127.0.0.1:8233',
    temporalNamespace: 'default',
    now: () => Date.now(),
  };
  const app = newApp(appDeps);
  const bundle = { code: readFileSync(inject('workflowBundlePath'), 'utf8') };
  const workers: { stop(): Promise<void> }[] = [];

  return {
    sql,
    temporal,
    nativeConnection,
    secrets,
    taskQueue,
    app,
    appDeps,
    async startWorker(overrides = {}) {
      const worker = await createWorker({
        connection: nativeConnection,
        namespace: 'default',
        taskQueue,
        workflowBundle: bundle,
        deps: {
          sql,
          secrets,
          log,
          suspendedReply: 'This service is temporarily unavailable.',
          workerId: `w${counter++}`,
          sendTimeoutMs: 2000,
          temporal,
          taskQueue,
          ...overrides,
        },
      });
      const running = worker.run();
      const handle = {
        worker,
        async stop() {
          if (worker.getState() === 'RUNNING') worker.shutdown();
          await running;
        },
      };
      workers.push(handle);
      return handle;
    },
    async close() {
      await Promise.all(workers.map((w) => w.stop()));
      await connection.close();
      await nativeConnection.close();
      await sql.end();
    },
  };
}
