// Worker process for scale-out deployments: workflows + activities, and the repair sweeper's Schedule.
import { createSql } from '../db/client';
import { assertRuntimeLogin } from '../db/provision';
import { auditKeyFrom } from '../lib/audit-key';
import { setEgressPolicy } from '../lib/egress';
import { createLogger } from '../lib/log';
import { createSecretBox } from '../lib/secret-box';
import { loadEnvOrExit, onShutdown, requireSettings } from '../runtime/entry';
import { startWorkerService } from '../runtime/services';
import { connectClient, connectWorkerConnection } from '../runtime/temporal';
import { startTelemetry } from '../telemetry/otel';

const env = requireSettings(
  loadEnvOrExit(),
  ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'SWITCHYARD_MASTER_KEY'],
  'for npm run worker (the embedded default is npm start)',
);
const telemetry = startTelemetry(env, 'switchyard-worker');
setEgressPolicy(env.SWITCHYARD_EGRESS ?? 'public_only');
const log = createLogger({ level: env.LOG_LEVEL, name: 'switchyard-worker' });
const stops: (() => Promise<void>)[] = [() => telemetry.shutdown()];
const shutdown = onShutdown(stops, log);

const sql = createSql(env.DATABASE_URL, { max: 20, auditKey: auditKeyFrom(env.SWITCHYARD_MASTER_KEY) });
stops.push(() => sql.end({ timeout: 5 }));
await assertRuntimeLogin(sql).catch((err: unknown) => {
  log.error({ err: err instanceof Error ? err.message : String(err) }, 'refusing to start');
  process.exit(2);
});
const temporal = await connectClient(env, env.TEMPORAL_ADDRESS, { tracing: !!telemetry.exporter });
stops.push(() => temporal.connection.close());
const connection = await connectWorkerConnection(env, env.TEMPORAL_ADDRESS);
stops.push(() => connection.close());
const { worker, done } = await startWorkerService({
  telemetry,
  env,
  connection,
  temporal,
  sql,
  secrets: createSecretBox(env.SWITCHYARD_MASTER_KEY),
  log,
});
stops.push(async () => {
  // The SDK also drains on SIGINT/SIGTERM by itself; shut down only if it has not started to.
  if (worker.getState() === 'RUNNING') worker.shutdown();
  await done;
});
done.catch((err: unknown) => {
  log.error({ err: String(err) }, 'worker stopped');
  void shutdown(1);
});
log.info({ taskQueue: env.TEMPORAL_TASK_QUEUE }, 'worker running');
