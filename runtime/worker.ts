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
}

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
    ...(opts.telemetry?.exporter ? tracing(opts.telemetry) : {}),
    // Graceful drain on SIGTERM: running activities get this long to finish.
    shutdownGraceTime: '20 seconds',
  });
}

function tracing(telemetry: Telemetry) {
  return {
    interceptors: {
      workflowModules: [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')],
      activity: [
        (ctx: ConstructorParameters<typeof OpenTelemetryActivityInboundInterceptor>[0]) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
        }),
        () => ({ inbound: new TenantSpanAttributes() }),
      ],
    },
    sinks: { exporter: makeWorkflowExporter(telemetry.exporter!, telemetry.resource) },
  };
}
