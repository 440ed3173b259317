import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { addLogFields } from '../../lib/log-context';
import { DEFERRED_SAMPLING } from '../../telemetry/sampling';
import { activeTraceId } from '../../telemetry/trace-id';
import type { AppEnv } from '../deps';

const tracer = trace.getTracer('switchyard-ingress');

/**
 * One span per webhook request, active while it is handled, so the workflow start (Temporal's client
 * interceptor) continues the same trace into the workflow and its activities. The span carries the
 * channel, the request id and (once verified) tenant.id — never the route key, headers or body.
 * Its sampling waits for the tenant (telemetry/sampling.ts: decided in api/ingress/record.ts).
 * A no-op when tracing is off.
 */
export function webhookSpan(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
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
