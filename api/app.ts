import { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { newUlid } from '../lib/ulid';
import { registerAdminRoutes } from './admin';
import type { AppDeps, AppEnv } from './deps';
import { ApiError, errorResponse } from './errors';
import { registerServiceRoutes } from './service/routes';
import { registerTelegramWebhook } from './webhooks/telegram';
import { webhookSpan } from './webhooks/tracing';
import { registerWecomWebhook } from './webhooks/wecom';

export const MAX_BODY_BYTES = 1024 * 1024;

/** Builds the whole HTTP app: service routes, webhooks and the admin API. Tests call app.request(). */
export function newApp(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({
    // One shape for every validation error: the failing fields, never the submitted values.
    defaultHook: (result, c) => {
      if (!result.success) {
        const fields = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
        return errorResponse(c, 'validation_failed', 'The request is invalid.', { fields });
      }
    },
  });

  app.use('*', async (c, next) => {
    const incoming = c.req.header('x-request-id');
    const requestId = incoming && /^[A-Za-z0-9._-]{1,64}$/.test(incoming) ? incoming : `req_${newUlid()}`;
    c.set('requestId', requestId);
    c.header('x-request-id', requestId);
    await next();
  });

  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => errorResponse(c, 'payload_too_large', `The body exceeds ${MAX_BODY_BYTES} bytes.`),
    }),
  );

  app.onError((err, c) => {
    if (err instanceof ApiError) return errorResponse(c, err.code, err.message, err.details);
    if (err instanceof HTTPException && err.status === 415)
      return errorResponse(c, 'unsupported_media_type', 'Unsupported content type.');
    if (err instanceof HTTPException && err.status === 400)
      return errorResponse(c, 'validation_failed', 'The body is not valid.');
    deps.log.error(
      { err: { name: (err as Error).name, message: (err as Error).message }, requestId: c.get('requestId') },
      'unhandled error',
    );
    return errorResponse(c, 'internal', 'Internal error.');
  });
  app.notFound((c) => errorResponse(c, 'not_found', 'No such route.'));

  app.use('/v1/webhooks/*', webhookSpan());
  registerServiceRoutes(app, deps);
  registerTelegramWebhook(app, deps);
  registerAdminRoutes(app, deps);
  registerWecomWebhook(app, deps);

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
