import type { Context, MiddlewareHandler } from 'hono';
import { type FailureLimit, FailureLimiter } from '../lib/failure-limiter';
import type { Logger } from '../lib/log';
import { errorResponse } from './errors';

/** Failed admin authentications per source address. */
export const ADMIN_FAILURE_LIMIT: FailureLimit = { failures: 10, windowMs: 60_000, maxKeys: 10_000 };
/** Failed webhook verifications per source address and route. */
export const WEBHOOK_FAILURE_LIMIT: FailureLimit = { failures: 30, windowMs: 60_000, maxKeys: 10_000 };
/**
 * Failed webhook verifications per source address over every route: a source spraying fresh
 * route keys (each one a new per-route budget) still runs out. High, because a provider's
 * addresses carry every tenant's webhooks.
 */
export const WEBHOOK_SOURCE_FAILURE_LIMIT: FailureLimit = {
  failures: 600,
  windowMs: 60_000,
  maxKeys: 10_000,
};

/**
 * Limits failed authentication by source: a key (see `keyOf`) whose failures used up its budget
 * gets 429 `rate_limited` with Retry-After, before any handler runs, so the answer costs no
 * database statement. A failure is a 401: the API answers `unauthenticated` for a failed admin
 * authentication or webhook verification and nothing else (api/errors.ts), so every other answer,
 * a success above all, leaves the budget alone. Requests with no connection (in-process: tests,
 * benchmarks) have no source and are not limited. `keyOf` returns null to exempt a request.
 */
export function limitFailures(p: {
  scope: string;
  limit: FailureLimit;
  keyOf: (c: Context, source: string) => string | null;
  now: () => number;
  log: Logger;
}): MiddlewareHandler {
  const limiter = new FailureLimiter(p.limit);
  return async (c, next) => {
    const source = c.get('sourceAddress');
    const key = source === null ? null : p.keyOf(c, source);
    if (key === null) return next();
    const waitMs = limiter.retryAfterMs(key, p.now());
    if (waitMs > 0) {
      c.header('Retry-After', String(Math.max(1, Math.ceil(waitMs / 1000))));
      return errorResponse(c, 'rate_limited', 'Too many failed attempts from this address; retry later.');
    }
    await next();
    if (c.res.status === 401 && limiter.fail(key, p.now())) {
      // When the budget runs out, not per refused request: a flood must not become a log flood.
      p.log.warn(
        {
          scope: p.scope,
          source,
          requestId: c.get('requestId'),
          client_request_id: c.get('clientRequestId'),
        },
        'failure limit reached; refusing this source for a while',
      );
    }
  };
}
