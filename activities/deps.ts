import type { Client } from '@temporalio/client';
import type { Sql } from 'postgres';
import type { Logger } from '../lib/log';
import type { SecretBox } from '../lib/secret-box';
import type { Metrics } from '../telemetry/metrics';

/** What activities need from the process; built once by the worker. */
export interface ActivityDeps {
  sql: Sql;
  secrets: SecretBox;
  log: Logger;
  /** Fixed reply for a suspended tenant (SWITCHYARD_SUSPENDED_REPLY). */
  suspendedReply: string;
  /** Identifies this worker process in execution and segment claims. */
  workerId: string;
  /** Per-request timeout for outbound provider calls. */
  sendTimeoutMs: number;
  /** The repair sweeper starts, describes and terminates workflows (absent: no sweeps here). */
  temporal?: Client;
  /** The task queue repair runs are started on. */
  taskQueue?: string;
  /**
   * Artifact storage (lib/artifact-store.ts): `filesystem` profiles keep objects under
   * `<dataDir>/artifacts`; `trustedEndpoints` are the origins of SWITCHYARD_ARTIFACT_ENDPOINTS.
   * Absent: `.data`, none trusted.
   */
  artifacts?: { dataDir: string; trustedEndpoints: readonly string[] };
  /** Prometheus metrics (telemetry/metrics.ts); absent: nothing is recorded (tests that need none). */
  metrics?: Metrics;
}
