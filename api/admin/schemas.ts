import { z } from '@hono/zod-openapi';
import { ERROR_CODES } from '../errors';

// Shared request/response pieces of the admin API. Path ids are plain bounded strings: an id that
// is malformed simply names no object, so it gets the same 404 as an unknown one.

export const ErrorSchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES),
      message: z.string(),
      request_id: z.string(),
      details: z.unknown().optional(),
    }),
  })
  .openapi('Error');

const errorDescriptions = {
  400: 'validation_failed: the failing fields (paths and messages, never values)',
  401: 'unauthenticated: missing or invalid bearer token',
  403: "forbidden: the caller's role may not do this",
  404: 'not_found (also: any object of another tenant)',
  409: 'optimistic_conflict | invalid_transition | conflict | tenant_disabled',
  413: 'payload_too_large: the body is over the API limit (checked before authentication)',
  415: 'unsupported_media_type: a body that is not application/json',
  429: 'rate_limited: too many failed authentications from this address (Retry-After)',
  500: 'internal: an unexpected error (logged with the request id)',
} as const;

/** Statuses any admin route may answer, whatever it documents itself. */
const EVERY_ROUTE: ErrorStatus[] = [413, 415, 429, 500];

export type ErrorStatus = keyof typeof errorDescriptions;

/** The typed error responses of statuses `S` (those of every route are documented, not typed). */
export type ErrorResponses<S extends ErrorStatus> = Record<
  S,
  { description: string; content: { 'application/json': { schema: typeof ErrorSchema } } }
>;

/** One error response in the single error envelope, for a status a route describes itself. */
export const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ErrorSchema } },
});

/** The error responses a route documents; every one uses the single error envelope. */
export function errorResponses<S extends ErrorStatus>(...statuses: S[]): ErrorResponses<S> {
  return Object.fromEntries(
    [...new Set<ErrorStatus>([...statuses, ...EVERY_ROUTE])].map((s) => [
      s,
      errorResponse(errorDescriptions[s]),
    ]),
  ) as unknown as ErrorResponses<S>;
}

export const jsonBody = <T extends z.ZodType>(schema: T, description?: string) => ({
  required: true,
  description,
  content: { 'application/json': { schema } },
});

export const jsonResponse = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

export const pathId = (name: string) =>
  z
    .string()
    .min(1)
    .max(200)
    .openapi({ param: { name, in: 'path' } });

export const TenantParams = z.object({ tenant_id: pathId('tenant_id') });

/** `limit` is clamped to 1..200 (default 50), never rejected for size; `cursor` is opaque. */
export const ListQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .optional()
    .openapi({ param: { name: 'limit', in: 'query' }, example: 50 }),
  cursor: z
    .string()
    .max(1000)
    .optional()
    .openapi({ param: { name: 'cursor', in: 'query' } }),
});

export const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), next_cursor: z.string().nullable() });

export const Timestamp = z.string().openapi({ format: 'date-time' });

export const ExpectedVersion = z.number().int().min(1);

/** Keys of the seeds' grammar (tenant_key, app_key, profile_key): 2–64, lower-case, letter first. */
export const SLUG = /^[a-z][a-z0-9-]{1,63}$/;
export const slug = (what: string) =>
  z.string().regex(SLUG, `${what} must be 2-64 characters of a-z, 0-9 and '-', starting with a letter`);

export const displayName = z
  .string()
  .trim()
  .min(1, 'display_name must not be blank')
  .max(200, 'display_name must be at most 200 characters');

export const JsonObject = z.record(z.string(), z.unknown());

export const iso = (d: Date | string | null): string | null =>
  d === null ? null : typeof d === 'string' ? d : d.toISOString();
export const isoNN = (d: Date | string): string => (typeof d === 'string' ? d : d.toISOString());
