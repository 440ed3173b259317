import { ProxyTracerProvider, SpanStatusCode, trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { addLogFields } from '../../lib/log-context';
import { DEFERRED_SAMPLING } from '../../telemetry/sampling';
import { activeTraceId } from '../../telemetry/trace-id';
import type { AppEnv } from '../deps';

const tracer = trace.getTracer('switchyard-ingress');
/** What the API's global provider delegates to until an SDK registers one (telemetry/otel.ts). */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * No SDK registered a provider (tracing is off: no OTEL_* exporter): every span would be a
 * non-recording no-op with an invalid context, so none is made. Another copy of the API, or any
 * registered provider, counts as on.
 */
function tracingOff(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider && provider.getDelegate() === NOOP_PROVIDER;
}

/**
 * One span per webhook request, active while it is handled, so the workflow start (Temporal's client
 * interceptor) continues the same trace into the workflow and its activities. The span carries the
 * channel, the request id and (once verified) tenant.id — never the route key, headers or body.
 * Its sampling waits for the tenant (telemetry/sampling.ts: decided in api/ingress/record.ts).
 * Nothing at all when tracing is off: a no-op span has no trace id, attributes or sampling to carry
 * (activeTraceId() is null and decideTenantSampling() keeps the context either way).
 */
export function webhookSpan(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (tracingOff()) return next();
    const channel = c.req.path.split('/')[3] ?? 'unknown';
    const attributes = { [DEFERRED_SAMPLING]: true };
    await tracer.startActiveSpan(`webhook ${channel}`, { attributes }, async (span) => {
      span.setAttribute('switchyard.channel', channel);
      span.setAttribute('switchyard.request_id', c.get('requestId'));
      // The access line is written outside this span (api/access-log.ts): give it the trace id.
      const traceId = activeTraceId();
      if (traceId) addLogFields({ trace_id: traceId });
      try {
        await next();
        span.setAttribute('http.response.status_code', c.res.status);
        if (c.res.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      } finally {
        span.end();
      }
    });
  };
}
