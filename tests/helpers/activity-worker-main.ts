// An activities-only Switchyard worker in its own process (no workflow tasks), for the delivery
// soak: it can be SIGKILLed while it holds claimed segments without also losing a workflow task.
// Configured by environment like worker-main.ts; prints "ready" once polling.
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../../activities';
import { createSql } from '../../db/client';
import { createLogger } from '../../lib/log';
import { createSecretBox } from '../../lib/secret-box';

const env = process.env as Record<string, string>;
const sql = createSql(env.TEST_DATABASE_URL!, { max: 5 });
const connection = await NativeConnection.connect({ address: env.TEST_TEMPORAL_ADDRESS! });
const worker = await Worker.create({
  connection,
  namespace: 'default',
  taskQueue: env.TEST_TASK_QUEUE!,
  activities: createActivities({
    sql,
    secrets: createSecretBox(env.TEST_MASTER_KEY!),
    log: createLogger({ level: 'silent' }),
    suspendedReply: 'This service is temporarily unavailable.',
    workerId: env.TEST_WORKER_ID ?? `activities-${process.pid}`,
    sendTimeoutMs: Number(env.TEST_SEND_TIMEOUT_MS ?? 2000),
  }),
  maxConcurrentActivityTaskExecutions: 50,
});
const running = worker.run();
console.log('ready');
process.on('SIGTERM', () => worker.shutdown());
await running;
await connection.close();
await sql.end();
