import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { serve } from '@hono/node-server';
import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import type { Registry } from 'prom-client';
import { newApp } from '../api/app';
import { LATE_RECORD_LOCK_TIMEOUT_MS, LATE_RECORDS_MAX } from '../api/ingress/late-record';
import { INGRESS_LOCK_TIMEOUT_MS } from '../api/ingress/record-batcher';
import type { Env } from '../config/env';
import { createBoundedWaitSql, type Sql } from '../db/client';
import { deadLetterDepth } from '../db/queries/housekeeping';
import type { Logger } from '../lib/log';
import type { SecretBox } from '../lib/secret-box';
import { startRegistry } from '../registry';
import { createMetrics, createRegistry, registerDlqDepth } from '../telemetry/metrics';
import type { Telemetry } from '../telemetry/otel';
import { startAuditSealer } from './audit-sealer';
import { closeServer, sleep } from './drain';
import { ensureHousekeepingSchedule } from './housekeeping-schedule';
import { ensureSweeperSchedule } from './sweeper-schedule';
import { createWorker } from './worker';
import { startWorkerHttp, type WorkerHttp } from './worker-http';

export interface ApiService {
  url: string;
  /**
   * Drains, then stops: /readyz turns 503 at once, every other route keeps serving (in-flight and
   * new requests) for SWITCHYARD_DRAIN_S, then the listener closes, waiting for in-flight requests
   * up to CLOSE_BOUND_MS. `drainMs` overrides the drain period (0: close at once).
   */
  close(opts?: { drainMs?: number }): Promise<void>;
}

export async function startApi(p: {
  env: Env;
  sql: Sql;
  temporal: Client;
  secrets: SecretBox;
  log: Logger;
  adminToken: string;
  temporalUiUrl: string | null;
  auditKey: string;
  /** overrides SWITCHYARD_PROOF_API_BASES (the embedded default's sandbox) */
  proofApiBases?: readonly string[] | 'any';
  /** The process's metrics registry (npm start shares one with the worker); default: a new one. */
  registry?: Registry;
}): Promise<ApiService> {
  const metrics = p.registry ?? createRegistry();
  let draining = false;
  // The configuration registry: cached candidates, dropped on every version event (registry/).
  const config = await startRegistry({
    sql: p.sql,
    ttlMs: p.env.SWITCHYARD_REGISTRY_TTL_S * 1000,
    log: p.log,
    metrics,
  });
  // Webhook records wait at most INGRESS_LOCK_TIMEOUT_MS for a lock (then 503: the provider retries).
  const ingressSql = createBoundedWaitSql(p.sql, {
    max: p.env.SWITCHYARD_INGRESS_RECORD_CONCURRENCY,
    lockTimeoutMs: INGRESS_LOCK_TIMEOUT_MS,
    applicationName: 'switchyard-api-ingress',
  });
  const lateSql = createBoundedWaitSql(p.sql, {
    max: LATE_RECORDS_MAX,
    lockTimeoutMs: LATE_RECORD_LOCK_TIMEOUT_MS,
    applicationName: 'switchyard-api-late-record',
  });
  const app = newApp(
    {
      sql: p.sql,
      ingressSql,
      lateSql,
      temporal: p.temporal,
      taskQueue: p.env.TEMPORAL_TASK_QUEUE,
      secrets: p.secrets,
      log: p.log,
      metrics,
      adminToken: p.adminToken,
      auditKey: p.auditKey,
      proofApiBases: p.proofApiBases ?? p.env.SWITCHYARD_PROOF_API_BASES,
      temporalUiUrl: p.temporalUiUrl,
      temporalNamespace: p.env.TEMPORAL_NAMESPACE,
      artifacts: {
        dataDir: p.env.SWITCHYARD_DATA_DIR,
        trustedEndpoints: p.env.SWITCHYARD_ARTIFACT_ENDPOINTS,
      },
      now: () => Date.now(),
      draining: () => draining,
      registry: config.registry,
      ingressRecordConcurrency: p.env.SWITCHYARD_INGRESS_RECORD_CONCURRENCY,
    },
    { trustedProxyHops: p.env.SWITCHYARD_TRUSTED_PROXY_HOPS },
  );
  return await new Promise((resolve) => {
    // serve() without createServer options makes a node:http server.
    const server = serve({ fetch: app.fetch, hostname: p.env.HOST, port: p.env.PORT }, (info) => {
      resolve({
        url: `http://${info.address.includes(':') ? `[${info.address}]` : info.address}:${info.port}`,
        close: async (opts = {}) => {
          const drainMs = opts.drainMs ?? p.env.SWITCHYARD_DRAIN_S * 1000;
          draining = true;
          p.log.info({ drainMs }, 'draining: /readyz answers 503');
          await sleep(drainMs);
          await closeServer(server);
          await config.close();
          await ingressSql.end({ timeout: 5 });
          await lateSql.end({ timeout: 1 });
          p.log.info('API listener closed');
        },
      });
    }) as Server;
  });
}

/**
 * The worker: workflows and activities on the task queue, and the repair sweeper's Schedule
 * (created or brought to the current settings; the sweeper then runs on whichever worker polls),
 * with its HTTP server (runtime/worker-http.ts; null when SWITCHYARD_WORKER_PORT is 0):
 * the caller closes it after the worker stopped, so /metrics and /healthz answer while it drains.
 */
export async function startWorkerService(p: {
  env: Env;
  connection: NativeConnection;
  /** Starts, describes and terminates workflows for the repair sweeper. */
  temporal: Client;
  sql: Sql;
  secrets: SecretBox;
  log: Logger;
  telemetry?: Telemetry;
  /** The process's metrics registry (npm start shares one with the API); default: a new one. */
  registry?: Registry;
}): Promise<{ worker: Worker; done: Promise<void>; http: WorkerHttp | null }> {
  const registry = p.registry ?? createRegistry();
  registerDlqDepth(registry, (timeoutMs) => deadLetterDepth(p.sql, timeoutMs), p.log);
  // Listening first: a taken port fails the start before the workflow bundle is built; /readyz
  // answers 503 until the worker runs.
  let worker: Worker | undefined;
  const http =
    p.env.SWITCHYARD_WORKER_PORT === 0
      ? null
      : await startWorkerHttp({
          host: p.env.HOST,
          port: p.env.SWITCHYARD_WORKER_PORT,
          registry,
          ready: () => worker?.getState() === 'RUNNING',
          log: p.log,
        });
  try {
    worker = await createWorker({
      connection: p.connection,
      namespace: p.env.TEMPORAL_NAMESPACE,
      taskQueue: p.env.TEMPORAL_TASK_QUEUE,
      telemetry: p.telemetry,
      shutdownGraceMs: p.env.SWITCHYARD_SHUTDOWN_GRACE_S * 1000,
      maxCachedWorkflows: p.env.SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS,
      deps: {
        sql: p.sql,
        secrets: p.secrets,
        log: p.log,
        suspendedReply: p.env.SWITCHYARD_SUSPENDED_REPLY,
        workerId: `${hostname()}:${process.pid}`,
        sendTimeoutMs: 10_000,
        temporal: p.temporal,
        taskQueue: p.env.TEMPORAL_TASK_QUEUE,
        metrics: createMetrics(registry),
        artifacts: {
          dataDir: p.env.SWITCHYARD_DATA_DIR,
          trustedEndpoints: p.env.SWITCHYARD_ARTIFACT_ENDPOINTS,
        },
      },
    });
  } catch (err) {
    await http?.close();
    throw err;
  }
  await ensureSweeperSchedule(p.temporal, {
    taskQueue: p.env.TEMPORAL_TASK_QUEUE,
    everySeconds: p.env.SWITCHYARD_SWEEP_EVERY_S,
    passSeconds: p.env.SWITCHYARD_SWEEP_PASS_S,
    options: { staleSeconds: p.env.SWITCHYARD_REPAIR_AFTER_S, maxRepairs: p.env.SWITCHYARD_MAX_REPAIRS },
  });
  await ensureHousekeepingSchedule(p.temporal, {
    taskQueue: p.env.TEMPORAL_TASK_QUEUE,
    everySeconds: p.env.SWITCHYARD_HOUSEKEEPING_EVERY_S,
  });
  // Links the runtime's audit entries into their tenants' chains off the hot path; it lives as
  // long as the worker runs and seals once more after the last activity drained.
  const sealer = startAuditSealer({
    sql: p.sql,
    log: p.log,
    everyMs: p.env.SWITCHYARD_AUDIT_SEAL_EVERY_MS,
    metrics: createMetrics(registry),
  });
  return { worker, done: worker.run().finally(() => sealer.close()), http };
}
