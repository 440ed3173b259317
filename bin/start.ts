// Embedded default: everything in one command, nothing external needed.
//   data dir → PostgreSQL (DATABASE_URL or embedded) → migrations → Temporal (TEMPORAL_ADDRESS or
//   temporal-dev.sh) → worker + API. Ctrl-C / SIGTERM stops everything this process started.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError, loadEnv } from '../config/env';
import { startTelemetry } from '../telemetry/otel';

const env = (() => {
  try {
    return loadEnv();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
})();
// Telemetry first, then the modules that may create spans (dynamic imports below).
const telemetry = startTelemetry(env, 'switchyard');

const { startEmbeddedPostgres } = await import('../db/embedded');
const { runMigrations } = await import('../db/migrate');
const { createSql } = await import('../db/client');
const { createLogger } = await import('../lib/log');
const { createSecretBox } = await import('../lib/secret-box');
const { localSecret } = await import('../runtime/local-secrets');
const { connectClient, connectWorkerConnection } = await import('../runtime/temporal');
const { startApi, startWorkerService } = await import('../runtime/services');

const log = createLogger({ level: env.LOG_LEVEL });
// The embedded default talks to local sandboxes (npm run demo): private addresses are allowed
// unless SWITCHYARD_EGRESS says otherwise.
const { setEgressPolicy } = await import('../lib/egress');
setEgressPolicy(env.SWITCHYARD_EGRESS ?? 'allow_private');
const dataDir = resolve(env.SWITCHYARD_DATA_DIR);
mkdirSync(dataDir, { recursive: true });
const stops: (() => Promise<void>)[] = [];
let stopping = false;

async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log.info('shutting down');
  const timer = setTimeout(() => {
    log.error('shutdown took longer than 30 s; exiting');
    process.exit(1);
  }, 30_000);
  for (const stop of stops.reverse())
    await stop().catch((err: unknown) => log.error({ err: String(err) }, 'stop failed'));
  await telemetry.shutdown().catch(() => undefined);
  clearTimeout(timer);
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  const masterKey = localSecret(dataDir, 'master.key', env.SWITCHYARD_MASTER_KEY);
  const adminToken = localSecret(dataDir, 'admin-token', env.SWITCHYARD_ADMIN_TOKEN);

  let databaseUrl = env.DATABASE_URL;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres({ dataDir: `${dataDir}/pg`, port: env.SWITCHYARD_PG_PORT });
    stops.push(() => pg.stop());
    databaseUrl = pg.url;
    log.info({ port: env.SWITCHYARD_PG_PORT }, 'embedded PostgreSQL started');
  }
  await runMigrations(databaseUrl);

  let temporalAddress = env.TEMPORAL_ADDRESS;
  let temporalUiUrl = env.TEMPORAL_UI_URL ?? `http://127.0.0.1:${env.SWITCHYARD_TEMPORAL_UI_PORT}`;
  if (!temporalAddress) {
    const script = resolve(import.meta.dirname, '../temporal-dev.sh');
    // The dev server reads OTEL_* itself and refuses values it does not support (e.g. console):
    // our tracing settings are for Switchyard's own processes, not for it.
    const childEnv = Object.fromEntries(
      Object.entries({ ...process.env, SWITCHYARD_DATA_DIR: dataDir }).filter(
        ([k]) => !k.startsWith('OTEL_'),
      ),
    );
    const running = (() => {
      try {
        execFileSync('bash', [script, 'status'], { env: childEnv, stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    })();
    execFileSync('bash', [script, 'start'], { env: childEnv, stdio: ['ignore', 'ignore', 'inherit'] });
    if (!running)
      stops.push(async () => void execFileSync('bash', [script, 'stop'], { env: childEnv, stdio: 'ignore' }));
    temporalAddress = `127.0.0.1:${env.SWITCHYARD_TEMPORAL_PORT}`;
    temporalUiUrl = env.TEMPORAL_UI_URL ?? `http://127.0.0.1:${env.SWITCHYARD_TEMPORAL_UI_PORT}`;
  }

  const sql = createSql(databaseUrl, { max: 20 });
  stops.push(() => sql.end({ timeout: 5 }));
  const secrets = createSecretBox(masterKey.value);
  const temporal = await connectClient(env, temporalAddress, { tracing: !!telemetry.exporter });
  stops.push(() => temporal.connection.close());
  const nativeConnection = await connectWorkerConnection(env, temporalAddress);
  stops.push(() => nativeConnection.close());

  const worker = await startWorkerService({
    env,
    connection: nativeConnection,
    temporal,
    sql,
    secrets,
    log,
    telemetry,
  });
  stops.push(async () => {
    // The SDK also drains on SIGINT/SIGTERM by itself; shut down only if it has not started to.
    if (worker.worker.getState() === 'RUNNING') worker.worker.shutdown();
    await worker.done;
  });
  worker.done.catch((err: unknown) => {
    log.error({ err: String(err) }, 'worker stopped');
    void shutdown(1);
  });

  const api = await startApi({
    env,
    sql,
    temporal,
    secrets,
    log,
    adminToken: adminToken.value,
    temporalUiUrl,
  });
  stops.push(() => api.close());

  const lines = [
    '',
    'Switchyard is running (embedded default).',
    `  API           ${api.url}`,
    `  API docs      ${api.url}/docs`,
    `  Temporal UI   ${temporalUiUrl}`,
    `  Admin token   ${adminToken.path ? `in ${adminToken.path}` : 'from SWITCHYARD_ADMIN_TOKEN'}`,
    '  Try it:       npm run demo      (Ctrl-C stops everything)',
    '',
  ];
  console.log(lines.join('\n'));
} catch (err) {
  log.error({ err: err instanceof Error ? err.message : String(err) }, 'start failed');
  await shutdown(1);
}
