// A Switchyard worker in its own process, for tests that kill a worker (SIGKILL) mid-flight or run
// two workers on one task queue. Configured by environment; prints "ready" once polling.
import { readFileSync } from 'node:fs';
import { NativeConnection } from '@temporalio/worker';
import { createSql } from '../../db/client';
import { auditKeyFrom } from '../../lib/audit-key';
import { createLogger } from '../../lib/log';
import { createSecretBox } from '../../lib/secret-box';
import { createWorker } from '../../runtime/worker';

const env = process.env as Record<string, string>;
const sql = createSql(env.TEST_DATABASE_URL!, { max: 5, auditKey: auditKeyFrom(env.TEST_MASTER_KEY!) });
const connection = await NativeConnection.connect({ address: env.TEST_TEMPORAL_ADDRESS! });
const worker = await createWorker({
  connection,
  namespace: 'default',
  taskQueue: env.TEST_TASK_QUEUE!,
  workflowBundle: { code: readFileSync(env.TEST_WORKFLOW_BUNDLE!, 'utf8') },
  deps: {
    sql,
    secrets: createSecretBox(env.TEST_MASTER_KEY!),
    log: createLogger({ level: 'silent' }),
    suspendedReply: 'This service is temporarily unavailable.',
    workerId: env.TEST_WORKER_ID ?? `child-${process.pid}`,
    sendTimeoutMs: Number(env.TEST_SEND_TIMEOUT_MS ?? 2000),
  },
});
const running = worker.run();
console.log('ready');
process.on('SIGTERM', () => worker.shutdown());
await running;
await connection.close();
await sql.end();
