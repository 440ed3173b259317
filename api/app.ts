import { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { createConfigRegistry } from '../registry/cache';
import { createMetrics } from '../telemetry/metrics';
import { accessLog } from './access-log';
import { registerAdminRoutes } from './admin';
import { MAX_CONSOLE_BODY_BYTES } from './admin/console-media';
import { bodyGuard } from './body-guard';
import { bodySizeLimit, payloadTooLarge } from './body-limit';
import { registerConsole } from './console';
import type { AppDeps, AppEnv } from './deps';
import { ApiError, errorResponse, frameworkErrorResponse } from './errors';
import {
  ADMIN_FAILURE_LIMIT,
  limitFailures,
  WEBHOOK_FAILURE_LIMIT,
  WEBHOOK_SOURCE_FAILURE_LIMIT,
} from './failure-limit';
import { createLateRecorder, LATE_RECORDS_MAX } from './ingress/late-record';
import { createRecordBatcher } from './ingress/record-batcher';
import { httpMetrics } from './metrics';
import { invalidateTenantOnWrite } from './registry-hook';
import { requestMeta } from './request-meta';
import { registerServiceRoutes } from './service/routes';
import { webhookMetrics } from './webhooks/metrics';
import { createSecuritySink } from './webhooks/security-sink';
import { registerTelegramWebhook } from './webhooks/telegram';
import { webhookSpan } from './webhooks/tracing';
import { registerWecomWebhook } from './webhooks/wecom';

export const MAX_BODY_BYTES = 1024 * 1024;

export interface AppOptions {
  /**
   * Reverse proxies of our own in front of the API (SWITCHYARD_TRUSTED_PROXY_HOPS): that many
   * X-Forwarded-For entries are believed when finding the source address. Default 0: the socket.
   */
  trustedProxyHops?: number;
}

/** The console send route (POST), whose body may carry attachments. */
const CONSOLE_SEND_PATH = /^\/v1\/admin\/tenants\/[^/]+\/bindings\/[^/]+\/console\/messages$/;

/** `/v1/webhooks/<channel>/<route_key>`: the limiter's key is the source on that one route. */
const WEBHOOK_PATH = /^\/v1\/webhooks\/([a-z]+)\/([^/]{1,128})/;

/** Builds the whole HTTP app: service routes, webhooks and the admin API. Tests call app.request(). */
export function newApp(deps: AppDeps, opts: AppOptions = {}): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({
    // One shape for every validation error: the failing fields, never the submitted values.
    defaultHook: (result, c) => {
      if (!result.success) {
        const fields = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
        return errorResponse(c, 'validation_failed', 'The request is invalid.', { fields });
      }
    },
  });

  // First, so every answer is measured (by route pattern, never the path: api/metrics.ts).
  app.use('*', httpMetrics(deps.metrics));
  app.use('*', requestMeta({ trustedProxyHops: opts.trustedProxyHops ?? 0 }));
  app.use('*', accessLog(deps.log));
  app.use('/v1/webhooks/*', webhookMetrics(createMetrics(deps.metrics)));

  const defaultLimit = bodySizeLimit({ maxSize: MAX_BODY_BYTES, onError: payloadTooLarge });
  // The console send carries its attachments in the body (api/admin/console-media.ts), but nothing
  // over the default is read before authentication: a declared Content-Length over its cap is 413
  // from the header, one within it is not read here at all (the route reads and guards it after
  // adminAuth: api/admin/console.ts), and a body without a declared length keeps the default cap.
  const consoleSendLimit = bodySizeLimit({
    maxSize: MAX_BODY_BYTES,
    declaredMaxSize: MAX_CONSOLE_BODY_BYTES,
    onError: payloadTooLarge,
  });
  const isConsoleSend = (c: Context) => c.req.method === 'POST' && CONSOLE_SEND_PATH.test(c.req.path);
  app.use('*', (c, next) => (isConsoleSend(c) ? consoleSendLimit : defaultLimit)(c, next));
  const guard = bodyGuard();
  app.use('/v1/admin/*', (c, next) => (isConsoleSend(c) ? next() : guard(c, next)));

  app.onError((err, c) => {
    if (err instanceof ApiError) return errorResponse(c, err.code, err.message, err.details);
    const framework = frameworkErrorResponse(c, err);
    if (framework) return framework;
    deps.log.error(
      {
        err: { name: (err as Error).name, message: (err as Error).message },
        requestId: c.get('requestId'),
        client_request_id: c.get('clientRequestId'),
      },
      'unhandled error',
    );
    return errorResponse(c, 'internal', 'Internal error.');
  });
  app.notFound((c) => errorResponse(c, 'not_found', 'No such route.'));

  app.use('/v1/webhooks/*', webhookSpan());
  // Failed authentication is limited per source before the admin auth or the route lookup runs.
  // Admin: per address. Webhooks: per address and route, because a provider delivers every
  // tenant's webhooks from one pool of addresses: one tenant's misconfigured binding must not
  // block the others', and a known and an unknown route must behave alike (no route oracle).
  app.use(
    '/v1/admin/*',
    limitFailures({
      scope: 'admin',
      limit: ADMIN_FAILURE_LIMIT,
      keyOf: (_c, source) => source,
      now: deps.now,
      log: deps.log,
    }),
  );
  app.use(
    '/v1/webhooks/*',
    limitFailures({
      scope: 'webhook',
      limit: WEBHOOK_FAILURE_LIMIT,
      keyOf: (c, source) => {
        const m = WEBHOOK_PATH.exec(c.req.path);
        return m ? `${source} ${m[1]} ${m[2]}` : null;
      },
      now: deps.now,
      log: deps.log,
    }),
  );
  app.use(
    '/v1/webhooks/*',
    limitFailures({
      scope: 'webhook-source',
      limit: WEBHOOK_SOURCE_FAILURE_LIMIT,
      keyOf: (_c, source) => source,
      now: deps.now,
      log: deps.log,
    }),
  );
  const securitySink = createSecuritySink(deps);
  // Without a registry of the process, one that caches nothing: every webhook reads its binding.
  // One group commit per app (api/ingress/record-batcher.ts): concurrent webhooks share a record statement.
  const ingress = {
    ...deps,
    registry: deps.registry ?? createConfigRegistry({ sql: deps.sql, ttlMs: 0 }),
    recorder: createRecordBatcher(deps.ingressSql ?? deps.sql, {
      maxInFlight: deps.ingressRecordConcurrency,
    }),
    // Only on a pool of its own with short lock waits (a try that waited long would hold its
    // tenant's rate-limit window); without one, a timed-out record relies on the redelivery.
    lateRecorder: deps.lateSql
      ? createLateRecorder(deps.lateSql, { max: LATE_RECORDS_MAX, log: deps.log })
      : undefined,
  };
  app.use('/v1/admin/tenants/:tenant_id/*', invalidateTenantOnWrite(ingress.registry));
  app.use('/v1/admin/tenants/:tenant_id', invalidateTenantOnWrite(ingress.registry));
  registerServiceRoutes(app, deps);
  registerConsole(app);
  registerTelegramWebhook(app, ingress, securitySink);
  registerAdminRoutes(app, deps);
  registerWecomWebhook(app, ingress, securitySink);

  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Switchyard API',
      version: '0.1.0',
      description: 'IM channels to AI agents on durable workflows.',
    },
  });
  return app;
}
