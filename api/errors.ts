import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** The closed set of error codes of the API contract. */
export const ERROR_CODES = [
  'validation_failed',
  /** An attachment refused at the boundary (details.reason: too_large, type_not_allowed, type_mismatch). */
  'media_rejected',
  'unauthenticated',
  'forbidden',
  'not_found',
  'optimistic_conflict',
  'invalid_transition',
  'conflict',
  'tenant_disabled',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'budget_exhausted',
  'unavailable',
  'internal',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export function statusOf(code: ErrorCode): ContentfulStatusCode {
  switch (code) {
    case 'validation_failed':
    case 'media_rejected':
      return 400;
    case 'unauthenticated':
      return 401;
    case 'budget_exhausted':
      return 402;
    case 'forbidden':
      return 403;
    case 'not_found':
      return 404;
    case 'optimistic_conflict':
    case 'invalid_transition':
    case 'conflict':
    case 'tenant_disabled':
      return 409;
    case 'payload_too_large':
      return 413;
    case 'unsupported_media_type':
      return 415;
    case 'rate_limited':
      return 429;
    case 'internal':
      return 500;
    case 'unavailable':
      return 503;
    default: {
      const exhaustive: never = code;
      return exhaustive;
    }
  }
}

/** Thrown anywhere below a route; onError turns it into the envelope. Messages never carry secrets. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string; request_id: string; details?: unknown };
}

export function errorResponse(c: Context, code: ErrorCode, message: string, details?: unknown) {
  const body: ErrorEnvelope = {
    error: {
      code,
      message,
      request_id: (c.get('requestId') as string | undefined) ?? 'unknown',
      ...(details === undefined ? {} : { details }),
    },
  };
  return c.json(body, statusOf(code));
}

/**
 * The framework's own HTTP exceptions (malformed JSON, an unsupported media type, a body over the
 * limit) as the one envelope, for the app's and the admin sub-app's error handlers alike; null for
 * any other error.
 */
export function frameworkErrorResponse(c: Context, err: unknown): Response | null {
  if (!(err instanceof HTTPException)) return null;
  if (err.status === 415) return errorResponse(c, 'unsupported_media_type', 'Send application/json.');
  if (err.status === 413) return errorResponse(c, 'payload_too_large', 'The body is too large.');
  if (err.status === 400) return errorResponse(c, 'validation_failed', 'The body is not valid JSON.');
  return null;
}
