import type { Client } from '@temporalio/client';
import type { Sql } from 'postgres';
import type { Registry } from 'prom-client';
import type { Logger } from '../lib/log';
import type { SecretBox } from '../lib/secret-box';
import type { ConfigRegistry } from '../registry/cache';
import type { LateRecorder } from './ingress/late-record';
import type { RecordBatcher } from './ingress/record-batcher';

/** Everything the HTTP app needs, built by the entry point (or a test) and passed to newApp. */
export interface AppDeps {
  sql: Sql;
  temporal: Client;
  taskQueue: string;
  secrets: SecretBox;
  log: Logger;
  metrics: Registry;
  /**
   * api base URLs besides the providers' own that may answer an activation's ownership proof
   * (trailing slash stripped), or 'any' (the embedded sandbox, tests). Default: none.
   */
  proofApiBases?: readonly string[] | 'any';
  /** The audit chain key (lib/audit-key.ts): signs verification checkpoints. */
  auditKey: string;
  /** Platform admin token (SWITCHYARD_ADMIN_TOKEN or the generated one). */
  adminToken: string;
  /** Base URL of the Temporal Web UI, for links in admin responses; null: no links. */
  temporalUiUrl: string | null;
  temporalNamespace: string;
  /**
   * Artifact storage (lib/artifact-open.ts), as the worker has it: console uploads are stored by
   * the API. A `filesystem` profile's objects are under `<dataDir>/artifacts`, which the worker
   * must see too (the embedded default: one process). Absent: `.data`, no endpoint trusted.
   */
  artifacts?: { dataDir: string; trustedEndpoints: readonly string[] };
  /** Injectable clock (ms since epoch) for timestamp windows. */
  now: () => number;
  /**
   * True once shutdown has begun: /readyz answers 503 so the load balancer stops sending, while
   * every other route keeps serving until the listener closes. Absent: never draining.
   */
  draining?: () => boolean;
  /**
   * The process's configuration registry (registry/: cached candidates, invalidated by version
   * events). Absent: a registry that caches nothing (every webhook reads its binding, as tests
   * that change rows behind the app's back expect).
   */
  registry?: ConfigRegistry;
  /** SWITCHYARD_INGRESS_RECORD_CONCURRENCY: record statements at once (ingress/record-batcher.ts). */
  ingressRecordConcurrency?: number;
  /**
   * The pool webhook records run on: a bounded lock wait (db/client.ts createBoundedWaitSql), so a
   * record stuck behind a lock fails with 503 instead of holding its webhooks. Default: `sql`.
   */
  ingressSql?: Sql;
  /** The pool late records try on (short lock waits, api/ingress/late-record.ts). Absent: no late records. */
  lateSql?: Sql;
}

/** What the webhook routes get: the app's deps with the registry resolved and the app's group commit. */
export type IngressAppDeps = AppDeps & {
  registry: ConfigRegistry;
  recorder: RecordBatcher;
  lateRecorder: LateRecorder | undefined;
};

export type AppEnv = { Variables: { requestId: string } };
