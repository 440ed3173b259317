import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../deps';

const tracer = trace.getTracer('switchyard-ingress');

/**
 * One span per webhook request, active while it is handled, so the workflow start (Temporal's client
 * interceptor) continues the same trace into the workflow and its activities. The span carries the
 * channel, the request id and (once verified) tenant.id — never the route key, headers or body.
 * A no-op when tracing is off.
 */
export function webhookSpan(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const channel = c.req.path.split('/')[3] ?? 'unknown';
    await tracer.startActiveSpan(`webhook ${channel}`, async (span) => {
      span.setAttribute('switchyard.channel', channel);
      span.setAttribute('switchyard.request_id', c.get('requestId'));
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
