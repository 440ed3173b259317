import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { errorResponse } from './errors';

/**
 * Hono's bodyLimit, minus its cost on the common case. Hono reads `c.req.raw.body` first, which
 * makes @hono/node-server build the full WHATWG Request (a web ReadableStream over the socket, an
 * AbortSignal, undici's header conversion) for every request and then read the body through that
 * stream instead of its direct fast path: about 15% of the webhook path's CPU. A declared
 * Content-Length without Transfer-Encoding is judged from the header alone, exactly as Hono judges
 * it (the server refuses a body longer than the length it declared); anything else (chunked, or no
 * length: in-process `app.request` calls) goes through Hono's counting reader unchanged. GET and
 * HEAD carry no body to limit, as Hono finds.
 */
export function bodySizeLimit(opts: {
  maxSize: number;
  /**
   * A larger cap for a body that declares its Content-Length (no Transfer-Encoding), judged from
   * the header alone: nothing is read here, so the route reads it later (after authentication).
   * A body without a declared length is still read and counted against maxSize.
   */
  declaredMaxSize?: number;
  onError: (c: Context, limit: { maxSize: number; declared: boolean }) => Response | Promise<Response>;
}): MiddlewareHandler {
  const counting = bodyLimit({
    maxSize: opts.maxSize,
    onError: (c) => opts.onError(c, { maxSize: opts.maxSize, declared: false }),
  });
  const declaredMax = opts.declaredMaxSize ?? opts.maxSize;
  return (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const length = c.req.header('content-length');
    if (length !== undefined && c.req.header('transfer-encoding') === undefined) {
      return Number.parseInt(length, 10) > declaredMax
        ? Promise.resolve(opts.onError(c, { maxSize: declaredMax, declared: true }))
        : next();
    }
    return counting(c, next);
  };
}

/** 413 payload_too_large; a body without a declared length is told why a larger one was not taken. */
export function payloadTooLarge(c: Context, limit: { maxSize: number; declared: boolean }): Response {
  return errorResponse(
    c,
    'payload_too_large',
    limit.declared
      ? `The body exceeds ${limit.maxSize} bytes.`
      : `The body exceeds ${limit.maxSize} bytes (a larger body, where a route allows one, must declare its Content-Length).`,
  );
}
