import { type OpenAPIHono, z } from '@hono/zod-openapi';
import { normalizeTelegramUpdate, updateSchema } from '../../channels/telegram/update';
import { safeEqual } from '../../lib/digest';
import { RegistryUnavailable } from '../../registry/cache';
import { activeTraceId } from '../../telemetry/trace-id';
import { decodeStrict, textProblem } from '../body-guard';
import type { AppEnv, IngressAppDeps } from '../deps';
import { errorResponse } from '../errors';
import { resolveCandidate, routeKeyDigest } from '../ingress/candidate';
import { recordAndStart } from '../ingress/record';
import { rejectUnverified, unavailable } from './fixed';
import { setWebhookOutcome } from './metrics';
import type { SecuritySink } from './security-sink';

const SECRET_HEADER = 'x-telegram-bot-api-secret-token';
/** Telegram's secret_token alphabet (setWebhook), as binding secrets are validated on write. */
const SECRET_SHAPE = /^[A-Za-z0-9_-]{1,256}$/;

export function registerTelegramWebhook(
  app: OpenAPIHono<AppEnv>,
  deps: IngressAppDeps,
  sink: SecuritySink,
): void {
  app.openAPIRegistry.registerPath({
    method: 'post',
    path: '/v1/webhooks/telegram/{route_key}',
    tags: ['webhooks'],
    summary: 'Telegram Bot API webhook (an Update)',
    request: {
      params: z.object({ route_key: z.string() }),
      headers: z.object({ 'x-telegram-bot-api-secret-token': z.string() }),
    },
    responses: {
      200: {
        description:
          'Recorded (also when its workflow could not be started yet: the repair sweeper starts it), ' +
          'duplicate, or acknowledged without execution: `{}`',
      },
      400: { description: 'Verified request whose body is not a valid Update' },
      401: { description: 'Unknown route or failed verification (one fixed answer)' },
      413: { description: 'Body too large' },
      429: { description: 'Too many failed verifications from this address on this route (Retry-After)' },
      503: { description: 'Configuration could not be read and none fresh enough is cached (Retry-After)' },
    },
  });

  app.post('/v1/webhooks/telegram/:route_key', async (c) => {
    const routeKey = c.req.param('route_key');
    const given = c.req.header(SECRET_HEADER);
    // A secret no binding can have is refused before the route lookup: no database read. The
    // answer is the same fixed 401 whether or not the route exists.
    if (given === undefined || !SECRET_SHAPE.test(given)) {
      return rejectUnverified(c, sink, {
        channel: 'telegram',
        routeKeyDigest: routeKeyDigest(routeKey),
        failureClass: 'bad_secret_token',
      });
    }
    const resolved = await resolveCandidate(deps, 'telegram', routeKey).catch((err: unknown) => {
      if (err instanceof RegistryUnavailable) return null;
      throw err;
    });
    if (!resolved) return unavailable(c);
    const { digest, candidate } = resolved;
    if (!candidate)
      return rejectUnverified(c, sink, {
        channel: 'telegram',
        routeKeyDigest: digest,
        failureClass: 'unknown_route',
      });

    const verifier = candidate.verifier('webhook_verification');
    const expected = verifier.secret.webhook_secret_token;
    if (typeof expected !== 'string' || !safeEqual(given, expected)) {
      return rejectUnverified(c, sink, {
        channel: 'telegram',
        routeKeyDigest: digest,
        failureClass: 'bad_secret_token',
      });
    }
    if (!candidate.active) {
      return rejectUnverified(c, sink, {
        channel: 'telegram',
        routeKeyDigest: digest,
        failureClass: 'binding_not_active',
      });
    }
    const ctx = verifier.trust();

    if (!(c.req.header('content-type') ?? '').toLowerCase().startsWith('application/json')) {
      return errorResponse(c, 'unsupported_media_type', 'Telegram updates are application/json.');
    }
    // Verified: now the bytes themselves (api/body-guard.ts) — not UTF-8, U+0000, a lone
    // surrogate or deep nesting would be a 500 further on, and Telegram redelivers those.
    let body: unknown;
    try {
      const text = decodeStrict(await c.req.arrayBuffer());
      const problem = text === null ? 'The body is not valid UTF-8.' : textProblem(text, true);
      if (problem || text === null)
        return errorResponse(c, 'validation_failed', problem ?? 'The body is not valid UTF-8.');
      body = JSON.parse(text);
    } catch {
      return errorResponse(c, 'validation_failed', 'The body is not valid JSON.');
    }
    const parsed = updateSchema.safeParse(body);
    if (!parsed.success) {
      const fields = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
      return errorResponse(c, 'validation_failed', 'The body is not a valid Telegram Update.', { fields });
    }
    const msg = normalizeTelegramUpdate(parsed.data);
    if (!msg) {
      setWebhookOutcome(c, 'ignored');
      return c.json({}); // not a message (edits, callbacks…): acknowledged, nothing recorded
    }

    const outcome = await recordAndStart(deps, ctx, msg, {
      requestId: c.get('requestId'),
      traceId: activeTraceId(),
    });
    if (outcome.kind === 'not_routed') {
      return rejectUnverified(c, sink, {
        channel: 'telegram',
        routeKeyDigest: digest,
        failureClass: 'tenant_disabled',
      });
    }
    setWebhookOutcome(c, outcome.kind);
    return c.json({});
  });
}
