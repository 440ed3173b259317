import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../lib/log';
import { withLogFields } from '../lib/log-context';

/**
 * Runs the rest of the request with its log fields (request_id now; tenant_id once trusted, added
 * by the verifying code: lib/log-context.ts), so every line logged while handling it carries them,
 * then writes one access line. The route is the registered pattern (`c.req.routePath`, read after
 * the handler), never the path: webhook paths carry the route key, admin paths ids; no query
 * string, no headers, no body. Goes right after requestMeta, which makes the request id.
 */
export function accessLog(log: Logger): MiddlewareHandler {
  return (c, next) =>
    withLogFields({ request_id: c.get('requestId') }, async () => {
      const started = performance.now();
      await next();
      log.info(
        {
          method: c.req.method,
          route: c.req.routePath,
          status: c.res.status,
          duration_ms: Math.round((performance.now() - started) * 10) / 10,
          client_request_id: c.get('clientRequestId'),
        },
        'http request',
      );
    });
}
