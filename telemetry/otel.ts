import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { Env } from '../config/env';
import { SampledOnlyProcessor, TenantSampler } from './sampling';

export interface Telemetry {
  /** The exporter in use, or undefined when tracing is off (the Temporal worker reuses it). */
  exporter: SpanExporter | undefined;
  resource: Resource;
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK. Called first in every entry point. Spans are exported only when
 * the standard OTEL_* variables ask for it; otherwise the API is a no-op and costs nothing. What is
 * exported follows each tenant's trace_sampling_rate (telemetry/sampling.ts).
 */
export function startTelemetry(env: Env, defaultServiceName: string): Telemetry {
  const resource = new Resource({ [ATTR_SERVICE_NAME]: env.OTEL_SERVICE_NAME ?? defaultServiceName });
  const exporter = pickExporter(env);
  if (!exporter) return { exporter: undefined, resource, shutdown: async () => undefined };
  const sdk = new NodeSDK({
    resource,
    sampler: new TenantSampler(env.SWITCHYARD_UNTRUSTED_TRACE_SAMPLING_RATE),
    spanProcessors: [new SampledOnlyProcessor(new BatchSpanProcessor(exporter))],
    instrumentations: [],
  });
  sdk.start();
  return { exporter, resource, shutdown: () => sdk.shutdown() };
}

function pickExporter(env: Env): SpanExporter | undefined {
  if (env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  if (env.OTEL_TRACES_EXPORTER === 'console') return new ConsoleSpanExporter();
  if (
    env.OTEL_TRACES_EXPORTER === 'otlp' ||
    env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  ) {
    return new OTLPTraceExporter();
  }
  return undefined;
}
