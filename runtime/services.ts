import { hostname } from 'node:os';
import { type ServerType, serve } from '@hono/node-server';
import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { newApp } from '../api/app';
import type { Env } from '../config/env';
import type { Sql } from '../db/client';
import type { Logger } from '../lib/log';
import type { SecretBox } from '../lib/secret-box';
import type { Telemetry } from '../telemetry/otel';
import { ensureSweeperSchedule } from './sweeper-schedule';
import { createWorker } from './worker';

export interface ApiService {
  url: string;
  close(): Promise<void>;
}

export function startApi(p: {
  env: Env;
  sql: Sql;
  temporal: Client;
  secrets: SecretBox;
  log: Logger;
  adminToken: string;
  temporalUiUrl: string;
  auditKey: string;
}): Promise<ApiService> {
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const app = newApp(
    {
      sql: p.sql,
      temporal: p.temporal,
      taskQueue: p.env.TEMPORAL_TASK_QUEUE,
      secrets: p.secrets,
      log: p.log,
      metrics,
      adminToken: p.adminToken,
      auditKey: p.auditKey,
      temporalUiUrl: p.temporalUiUrl,
      temporalNamespace: p.env.TEMPORAL_NAMESPACE,
      now: () => Date.now(),
    },
    { trustedProxyHops: p.env.SWITCHYARD_TRUSTED_PROXY_HOPS },
  );
  return new Promise((resolve) => {
    const server: ServerType = serve({ fetch: app.fetch, hostname: p.env.HOST, port: p.env.PORT }, (info) => {
      resolve({
        url: `http://${info.address.includes(':') ? `[${info.address}]` : info.address}:${info.port}`,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}

/**
 * The worker: workflows and activities on the task queue, and the repair sweeper's Schedule
 * (created or brought to the current settings; the sweeper then runs on whichever worker polls).
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
}): Promise<{ worker: Worker; done: Promise<void> }> {
  const worker = await createWorker({
    connection: p.connection,
    namespace: p.env.TEMPORAL_NAMESPACE,
    taskQueue: p.env.TEMPORAL_TASK_QUEUE,
    telemetry: p.telemetry,
    deps: {
      sql: p.sql,
      secrets: p.secrets,
      log: p.log,
      suspendedReply: p.env.SWITCHYARD_SUSPENDED_REPLY,
      workerId: `${hostname()}:${process.pid}`,
      sendTimeoutMs: 10_000,
      temporal: p.temporal,
      taskQueue: p.env.TEMPORAL_TASK_QUEUE,
    },
  });
  await ensureSweeperSchedule(p.temporal, {
    taskQueue: p.env.TEMPORAL_TASK_QUEUE,
    everySeconds: p.env.SWITCHYARD_SWEEP_EVERY_S,
    passSeconds: p.env.SWITCHYARD_SWEEP_PASS_S,
    options: { staleSeconds: p.env.SWITCHYARD_REPAIR_AFTER_S, maxRepairs: p.env.SWITCHYARD_MAX_REPAIRS },
  });
  return { worker, done: worker.run() };
}
