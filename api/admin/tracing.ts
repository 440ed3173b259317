import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { addLogFields } from '../../lib/log-context';
import { DEFERRED_SAMPLING } from '../../telemetry/sampling';
import { activeTraceId } from '../../telemetry/trace-id';
import type { AdminEnv } from './env';

const tracer = trace.getTracer('switchyard-admin');

/**
 * One HTTP server span per admin request, active while it is handled (authentication included), so
 * the request's audit entry (api/admin/context.ts) stores its trace id and a workflow it starts
 * continues the trace. The span carries the method, the request id, the status and (once
 * authenticated) tenant.id — never the path (it names resources), the query, headers or body.
 * Its sampling waits for the principal (api/admin/auth.ts, telemetry/sampling.ts).
 * A no-op when tracing is off.
 */
export function adminSpan(): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    const attributes = { [DEFERRED_SAMPLING]: true };
    await tracer.startActiveSpan(
      `admin ${c.req.method}`,
      { kind: SpanKind.SERVER, attributes },
      async (span) => {
        span.setAttribute('http.request.method', c.req.method);
        span.setAttribute('switchyard.request_id', c.get('requestId'));
        // The access line is written outside this span (api/access-log.ts): give it the trace id.
        const traceId = activeTraceId();
        if (traceId) addLogFields({ trace_id: traceId });
        try {
          await next();
          const principal = c.get('principal');
          if (principal?.kind === 'api_key') span.setAttribute('tenant.id', principal.tenantId);
          span.setAttribute('http.response.status_code', c.res.status);
          if (c.res.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        } finally {
          span.end();
        }
      },
    );
  };
}
