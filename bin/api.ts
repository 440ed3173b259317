// API process for scale-out deployments: webhooks + admin API against external PostgreSQL and Temporal.
import { createSql } from '../db/client';
import { assertRuntimeLogin } from '../db/provision';
import { auditKeyFrom } from '../lib/audit-key';
import { setEgressPolicy } from '../lib/egress';
import { createLogger } from '../lib/log';
import { createSecretBox } from '../lib/secret-box';
import { CLOSE_BOUND_MS } from '../runtime/drain';
import { loadEnvOrExit, onShutdown, requireSearchAttributesOrExit, requireSettings } from '../runtime/entry';
import { startApi } from '../runtime/services';
import { connectClient } from '../runtime/temporal';
import { startTelemetry } from '../telemetry/otel';

const env = requireSettings(
  loadEnvOrExit(),
  ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'SWITCHYARD_MASTER_KEY', 'SWITCHYARD_ADMIN_TOKEN'],
  'for npm run api (the embedded default is npm start)',
);
const telemetry = startTelemetry(env, 'switchyard-api');
// The API calls out too (ownership proofs at activation): the same policy as the worker's.
setEgressPolicy(env.SWITCHYARD_EGRESS ?? 'public_only');
const log = createLogger({ level: env.LOG_LEVEL, name: 'switchyard-api' });
const stops: (() => Promise<void>)[] = [() => telemetry.shutdown()];
// SIGTERM: drain (readiness 503, still serving), close the listener, then the connections.
onShutdown(stops, log, { deadlineMs: env.SWITCHYARD_DRAIN_S * 1000 + CLOSE_BOUND_MS + 15_000 });

const sql = createSql(env.DATABASE_URL, { max: 20, auditKey: auditKeyFrom(env.SWITCHYARD_MASTER_KEY) });
stops.push(() => sql.end({ timeout: 5 }));
await assertRuntimeLogin(sql).catch((err: unknown) => {
  log.error({ err: err instanceof Error ? err.message : String(err) }, 'refusing to start');
  process.exit(2);
});
const temporal = await connectClient(env, env.TEMPORAL_ADDRESS, { tracing: !!telemetry.exporter });
stops.push(() => temporal.connection.close());
await requireSearchAttributesOrExit(temporal.connection, env.TEMPORAL_NAMESPACE, log);
const api = await startApi({
  env,
  sql,
  temporal,
  secrets: createSecretBox(env.SWITCHYARD_MASTER_KEY),
  log,
  adminToken: env.SWITCHYARD_ADMIN_TOKEN,
  auditKey: auditKeyFrom(env.SWITCHYARD_MASTER_KEY),
  temporalUiUrl: env.SWITCHYARD_TEMPORAL_UI_URL ?? null,
});
stops.push(() => api.close());
log.info({ url: api.url }, 'API listening');
