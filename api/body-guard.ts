import type { MiddlewareHandler } from 'hono';
import { errorResponse } from './errors';

/** Nesting a JSON body may have: far beyond any real request, far below a stack overflow. */
export const MAX_JSON_DEPTH = 64;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Refuses, before any handler or database, a body PostgreSQL could not store or the handlers could
 * not process whole: bytes that are not UTF-8 (decoding would silently replace them), U+0000
 * (text and jsonb cannot hold it), a lone UTF-16 surrogate escaped in JSON, or JSON nested deeper
 * than MAX_JSON_DEPTH (recursive digesting would overflow the stack). One linear pass over the
 * body bodyLimit already bounded; Hono caches it for the handler's own read. On the admin API; a
 * webhook runs the same checks after it verified the request (an unverified one stays a 401).
 */
export function bodyGuard(): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const raw = await c.req.arrayBuffer();
    if (raw.byteLength === 0) return next();
    const text = decodeStrict(raw);
    if (text === null) return errorResponse(c, 'validation_failed', 'The body is not valid UTF-8.');
    const problem = textProblem(text, /json/i.test(c.req.header('content-type') ?? ''));
    return problem ? errorResponse(c, 'validation_failed', problem) : next();
  };
}

/** The body as UTF-8, or null when it is not. */
export function decodeStrict(raw: ArrayBuffer): string | null {
  try {
    return utf8.decode(raw);
  } catch {
    return null;
  }
}

/** Why `text` is refused, or null. JSON rules (escapes, depth) only when `json`. */
export function textProblem(text: string, json: boolean): string | null {
  if (text.includes('\u0000')) return 'The body contains U+0000, which cannot be stored.';
  if (!json) return null;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c /* \ */) {
        const next = text[i + 1];
        if (next === 'u') {
          const code = Number.parseInt(text.slice(i + 2, i + 6), 16);
          if (code === 0) return 'The body contains U+0000, which cannot be stored.';
          if (code >= 0xd800 && code <= 0xdbff) {
            const low =
              text.slice(i + 6, i + 8) === '\\u'
                ? Number.parseInt(text.slice(i + 8, i + 12), 16)
                : Number.NaN;
            if (!(low >= 0xdc00 && low <= 0xdfff)) return 'The body contains a lone UTF-16 surrogate.';
            i += 6;
          } else if (code >= 0xdc00 && code <= 0xdfff) {
            return 'The body contains a lone UTF-16 surrogate.';
          }
          i += 5;
        } else {
          i += 1;
        }
      } else if (ch === 0x22 /* " */) {
        inString = false;
      }
      continue;
    }
    if (ch === 0x22) inString = true;
    else if (ch === 0x7b || ch === 0x5b) {
      depth += 1;
      if (depth > MAX_JSON_DEPTH) return `The body is nested deeper than ${MAX_JSON_DEPTH} levels.`;
    } else if (ch === 0x7d || ch === 0x5d) depth -= 1;
  }
  return null;
}
