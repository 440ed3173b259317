// Worker process for scale-out deployments: workflows + activities, and the repair sweeper's Schedule.
// Started through bin/worker.sh, which applies SWITCHYARD_WORKER_HEAP_MB as V8's heap limit.
import { getHeapStatistics } from 'node:v8';
import { createSql } from '../db/client';
import { assertRuntimeLogin } from '../db/provision';
import { auditKeyFrom } from '../lib/audit-key';
import { setEgressPolicy } from '../lib/egress';
import { createLogger } from '../lib/log';
import { createSecretBox } from '../lib/secret-box';
import { loadEnvOrExit, onShutdown, requireSearchAttributesOrExit, requireSettings } from '../runtime/entry';
import { startWorkerService } from '../runtime/services';
import { connectClient, connectWorkerConnection, installTemporalRuntime } from '../runtime/temporal';
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
// SIGTERM: polling stops at once, running activities get the grace period (plus the SDK's force
// time), then the connections close.
const shutdown = onShutdown(stops, log, { deadlineMs: env.SWITCHYARD_SHUTDOWN_GRACE_S * 1000 + 20_000 });

const sql = createSql(env.DATABASE_URL, { max: 20, auditKey: auditKeyFrom(env.SWITCHYARD_MASTER_KEY) });
stops.push(() => sql.end({ timeout: 5 }));
await assertRuntimeLogin(sql).catch((err: unknown) => {
  log.error({ err: err instanceof Error ? err.message : String(err) }, 'refusing to start');
  process.exit(2);
});
const temporal = await connectClient(env, env.TEMPORAL_ADDRESS, { tracing: !!telemetry.exporter });
stops.push(() => temporal.connection.close());
await requireSearchAttributesOrExit(temporal.connection, env.TEMPORAL_NAMESPACE, log);
try {
  // Before the first NativeConnection: the Temporal SDK's logger (pino) and metrics (their port).
  installTemporalRuntime(env, log);
} catch (err) {
  log.error({ err: (err as Error).message }, 'refusing to start');
  process.exit(2);
}
const connection = await connectWorkerConnection(env, env.TEMPORAL_ADDRESS);
stops.push(() => connection.close());
const { worker, done, http } = await startWorkerService({
  telemetry,
  env,
  connection,
  temporal,
  sql,
  secrets: createSecretBox(env.SWITCHYARD_MASTER_KEY),
  log,
}).catch((err: unknown) => {
  log.error({ err: (err as Error).message }, 'worker failed to start');
  process.exit(1);
});
// Closed after the worker stopped (stops run last first): /metrics and /healthz answer while it drains.
if (http) stops.push(() => http.close());
stops.push(async () => {
  // Readiness first: /readyz answers 503 `draining` from the moment shutdown begins.
  http?.setDraining();
  // The SDK also drains on SIGINT/SIGTERM by itself; shut down only if it has not started to.
  if (worker.getState() === 'RUNNING') worker.shutdown();
  await done;
});
done.catch((err: unknown) => {
  log.error({ err: String(err) }, 'worker stopped');
  void shutdown(1);
});
// The old generation's bound plus the young generation's few tens of MB.
const heapLimitMb = Math.round(getHeapStatistics().heap_size_limit / 2 ** 20);
const wantedMb = env.SWITCHYARD_WORKER_HEAP_MB;
if (wantedMb > 0 && (heapLimitMb < wantedMb || heapLimitMb > wantedMb + 128))
  log.warn(
    { heapLimitMb, SWITCHYARD_WORKER_HEAP_MB: wantedMb },
    'the heap limit is not SWITCHYARD_WORKER_HEAP_MB: start the worker with bin/worker.sh (npm run worker)',
  );
log.info({ taskQueue: env.TEMPORAL_TASK_QUEUE, heapLimitMb }, 'worker running');
