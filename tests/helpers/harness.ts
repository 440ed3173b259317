import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { inject } from 'vitest';
import type { ActivityDeps } from '../../activities';
import { newApp } from '../../api/app';
import type { AppDeps } from '../../api/deps';
import { createSql, type Sql } from '../../db/client';
import { provisionLogins } from '../../db/provision';
import { createLogger } from '../../lib/log';
import { createSecretBox, type SecretBox } from '../../lib/secret-box';
import { createWorker } from '../../runtime/worker';
import { SUITE_AUDIT_KEY, SUITE_MASTER_KEY, TEST_LOGIN_PASSWORDS, testLoginUrl } from './db-logins';

// A fixed test master key: secrets sealed by one test file open in another.
export const TEST_MASTER_KEY = SUITE_MASTER_KEY;
export const TEST_ADMIN_TOKEN = 'test-platform-token-0123456789abcdef';

export interface Harness {
  /** The superuser: for seeding and inspecting rows the way no runtime role may. */
  sql: Sql;
  /** What the API logs in as (switchyard_api), as appDeps.sql. */
  apiSql: Sql;
  /** What the worker logs in as (switchyard_worker), as the started workers' deps.sql. */
  workerSql: Sql;
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
  const url = opts.databaseUrl ?? inject('databaseUrl');
  // The suite's cluster is provisioned by the global setup; a test's private one here.
  if (opts.databaseUrl) await provisionLogins(url, TEST_LOGIN_PASSWORDS);
  const sql = createSql(url, { max: 10, auditKey: SUITE_AUDIT_KEY });
  const apiSql = createSql(testLoginUrl(url, 'api'), { max: 10, auditKey: SUITE_AUDIT_KEY });
  const workerSql = createSql(testLoginUrl(url, 'worker'), { max: 10, auditKey: SUITE_AUDIT_KEY });
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  const temporal = new Client({ connection, namespace: 'default' });
  const nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const secrets = createSecretBox(TEST_MASTER_KEY);
  const log = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const taskQueue = opts.taskQueue ?? `test-${process.pid}-${Date.now()}-${counter++}`;
  const appDeps: AppDeps = {
    sql: apiSql,
    temporal,
    taskQueue,
    secrets,
    log,
    metrics: new Registry(),
    adminToken: TEST_ADMIN_TOKEN,
    auditKey: SUITE_AUDIT_KEY,
    // The fakes answer ownership proofs (tests/integration/binding-ownership.test.ts checks the default).
    proofApiBases: 'any',
    temporalUiUrl: 'http://127.0.0.1:8233',
    temporalNamespace: 'default',
    now: () => Date.now(),
  };
  const app = newApp(appDeps);
  const bundle = { code: readFileSync(inject('workflowBundlePath'), 'utf8') };
  const workers: { stop(): Promise<void> }[] = [];

  return {
    sql,
    apiSql,
    workerSql,
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
          sql: workerSql,
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
      await Promise.all([sql.end(), apiSql.end(), workerSql.end()]);
    },
  };
}
