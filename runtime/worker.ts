import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { type NativeConnection, Worker } from '@temporalio/worker';
import { type ActivityDeps, createActivities } from '../activities';
import { TenantSpanAttributes } from '../telemetry/activity-attributes';
import type { Telemetry } from '../telemetry/otel';
import { ActivityLogFields } from './activity-log-fields';

const require = createRequire(import.meta.url);

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** Pre-built workflow bundle (tests share one to save the webpack step). */
  workflowBundle?: { code: string };
  maxConcurrentActivityTaskExecutions?: number;
  /** When tracing is on: workflow and activity spans, continuing the trace started at the webhook. */
  telemetry?: Telemetry;
  /** Shutdown: how long running activities may take to finish (SWITCHYARD_SHUTDOWN_GRACE_S; default 20 s). */
  shutdownGraceMs?: number;
  /**
   * Workflows kept in memory between their tasks (SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS). Waiting
   * and parked executions beyond it are evicted and replayed from their (short) histories when
   * woken, so a backlog of any size costs bounded memory. Default DEFAULT_MAX_CACHED_WORKFLOWS.
   */
  maxCachedWorkflows?: number;
}

/**
 * ~1 MB each at most (Temporal's measure). Four times the activity slots: every execution that is
 * between two of its activities stays cached, while waiting and parked ones (woken rarely, their
 * histories about 15 events) are replayed instead. bench:scale measured what more costs: at 500 a
 * backlog of 10,000 filled the cache that 2,000 did not, about 100 MB more worker RSS for no
 * throughput.
 */
export const DEFAULT_MAX_CACHED_WORKFLOWS = 200;

/** After the grace period, cancelled activities get this long to let go before the worker gives up on them. */
const SHUTDOWN_FORCE_AFTER_GRACE_MS = 5_000;

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

/** Builds a worker that serves every workflow and activity of Switchyard on one task queue. */
export function createWorker(opts: WorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    activities: createActivities(opts.deps),
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : { workflowsPath }),
    maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivityTaskExecutions ?? 50,
    maxCachedWorkflows: opts.maxCachedWorkflows ?? DEFAULT_MAX_CACHED_WORKFLOWS,
    ...(opts.telemetry?.exporter
      ? tracing(opts.telemetry)
      : { interceptors: { activity: [activityLogFields] } }),
    // Drain on SIGTERM: polling stops at once; running activities get the grace period to finish,
    // then are cancelled (their attempt fails and Temporal retries it on another worker). One that
    // ignores cancellation is abandoned after the force time (its attempt times out, same result),
    // so a worker always exits.
    shutdownGraceTime: opts.shutdownGraceMs ?? 20_000,
    shutdownForceTime: (opts.shutdownGraceMs ?? 20_000) + SHUTDOWN_FORCE_AFTER_GRACE_MS,
  });
}

/** Every activity line carries its tenant, event, workflow and activity (runtime/activity-log-fields.ts). */
const activityLogFields = () => ({ inbound: new ActivityLogFields() });

function tracing(telemetry: Telemetry) {
  return {
    interceptors: {
      workflowModules: [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')],
      activity: [
        activityLogFields,
        (ctx: ConstructorParameters<typeof OpenTelemetryActivityInboundInterceptor>[0]) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
        }),
        () => ({ inbound: new TenantSpanAttributes() }),
      ],
    },
    sinks: { exporter: makeWorkflowExporter(telemetry.exporter!, telemetry.resource) },
  };
}
