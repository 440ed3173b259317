import type { Context } from 'hono';
import type { Channel } from '../../workflows/shared';
import type { AppEnv } from '../deps';
import { errorResponse } from '../errors';
import { setWebhookOutcome } from './metrics';
import type { SecuritySink } from './security-sink';

/**
 * Every rejection before trust is established gets this one answer, whatever the cause (unknown
 * route, bad signature, inactive binding, disabled tenant), so a caller learns nothing; the cause
 * goes only to the tenant-less security sink (sampled under a flood: ./security-sink.ts). The 401
 * is also what the app's failure limiter counts (api/app.ts).
 */
export async function rejectUnverified(
  c: Context<AppEnv>,
  sink: SecuritySink,
  e: { channel: Channel; routeKeyDigest: string | null; failureClass: string },
) {
  await sink.record({ requestId: c.get('requestId'), clientRequestId: c.get('clientRequestId'), ...e });
  setWebhookOutcome(c, 'unverified');
  return errorResponse(c, 'unauthenticated', 'Request could not be verified.');
}

/**
 * The registry could not read PostgreSQL and holds nothing within its TTL for this route: a 503
 * (providers retry it), never a verdict from an old status. Same answer for every route.
 */
export function unavailable(c: Context<AppEnv>) {
  c.header('Retry-After', '1');
  return errorResponse(c, 'unavailable', 'Temporarily unavailable; retry later.');
}
