import { prometheus } from '@hono/prometheus';
import type { MiddlewareHandler } from 'hono';
import type { Registry } from 'prom-client';

const made = new WeakMap<Registry, MiddlewareHandler>();

/**
 * HTTP request metrics of @hono/prometheus (`http_requests_total`, `http_request_duration_seconds`
 * by method, status, ok and route). Its `route` label is `c.req.routePath`, read after the handler
 * ran: the registered pattern (`/v1/webhooks/telegram/:route_key`, `/v1/admin/tenants/:tenant_id`),
 * never the path, which carries route keys and ids; a request no route matched is labelled with
 * the last middleware's pattern (`*`, `/v1/webhooks/*`). One middleware per registry: prom-client
 * refuses a second registration of a name, and tests build several apps on one registry.
 */
export function httpMetrics(registry: Registry): MiddlewareHandler {
  let middleware = made.get(registry);
  if (!middleware) {
    middleware = prometheus({ registry }).registerMetrics;
    made.set(registry, middleware);
  }
  return middleware;
}
