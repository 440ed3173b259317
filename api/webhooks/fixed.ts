import type { Context } from 'hono';
import type { Sql } from 'postgres';
import { recordSecurityEvent } from '../../db/queries/ingress';
import type { Logger } from '../../lib/log';
import type { Channel } from '../../workflows/shared';
import type { AppEnv } from '../deps';
import { errorResponse } from '../errors';

/**
 * Every rejection before trust is established gets this one answer, whatever the cause (unknown
 * route, bad signature, inactive binding, disabled tenant), so a caller learns nothing; the cause
 * goes only to the tenant-less security sink.
 */
export async function rejectUnverified(
  c: Context<AppEnv>,
  deps: { sql: Sql; log: Logger },
  e: { channel: Channel; routeKeyDigest: string | null; failureClass: string },
) {
  const requestId = c.get('requestId');
  await recordSecurityEvent(deps.sql, { requestId, ...e }).catch((err: unknown) =>
    deps.log.error({ requestId, err: (err as Error).message }, 'could not record ingress security event'),
  );
  return errorResponse(c, 'unauthenticated', 'Request could not be verified.');
}
