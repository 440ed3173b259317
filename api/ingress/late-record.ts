import type { Sql } from 'postgres';
import { isLockTimeout } from '../../db/errors';
import {
  type RecordedMessage,
  type RecordMessageParams,
  recordInboundMessage,
} from '../../db/queries/ingress';
import type { Logger } from '../../lib/log';

/**
 * Records that ran out of their lock bound (record-batcher.ts INGRESS_LOCK_TIMEOUT_MS), finished in
 * the background after their webhook was answered 503: a provider whose redeliveries end before the
 * lock is released (WeCom retries a callback only a few times, seconds apart) would otherwise lose
 * the message. The redelivery that comes later finds it recorded (a duplicate).
 *
 * Each try is the same one-statement record on a pool of its own whose lock waits are short
 * (LATE_RECORD_LOCK_TIMEOUT_MS), tried again every RETRY_MS until DEADLINE_MS: the record takes its
 * tenant's rate-limit window before the chat's session, so a try that waited on the session for as
 * long as the lock lasts would hold up every other chat of the tenant. At most `max` messages are
 * carried at once per process (one per message however often it is redelivered meanwhile); beyond
 * that the redelivery is the only way in, as before.
 */
export interface LateRecorder {
  /** false: too many are carried already (nothing was taken on). */
  submit(p: RecordMessageParams, then: (r: RecordedMessage) => Promise<void>): boolean;
}

/** Messages carried at once per API process, each on a connection of the late pool. */
export const LATE_RECORDS_MAX = 2;

/** A try's longest lock wait: what it may hold up the tenant's other chats. */
export const LATE_RECORD_LOCK_TIMEOUT_MS = 200;
const RETRY_MS = 1_000;
/** Past this the late record gives up (the message was never acknowledged: nothing is lost that a provider kept). */
const DEADLINE_MS = 10 * 60_000;

export function createLateRecorder(
  sql: Sql,
  opts: { max: number; log: Logger; retryMs?: number; deadlineMs?: number },
): LateRecorder {
  const carried = new Set<string>();
  const retryMs = opts.retryMs ?? RETRY_MS;
  const deadlineMs = opts.deadlineMs ?? DEADLINE_MS;
  // Ends with the pool too: once the API closed it, a try fails with CONNECTION_ENDED (not 55P03).
  const carry = async (p: RecordMessageParams): Promise<RecordedMessage> => {
    for (const until = Date.now() + deadlineMs; ; ) {
      try {
        return await recordInboundMessage(sql, p);
      } catch (err) {
        if (!isLockTimeout(err) || Date.now() >= until) throw err;
      }
      await new Promise((r) => setTimeout(r, retryMs));
    }
  };
  return {
    submit(p, then) {
      if (carried.has(p.idempotencyKey)) return true;
      if (carried.size >= opts.max) return false;
      carried.add(p.idempotencyKey);
      const fields = { requestId: p.requestId, tenantId: p.tenantId, workflowId: p.workflowId };
      void carry(p)
        .then(
          (r) =>
            then(r).catch((err: unknown) =>
              opts.log.warn(
                { ...fields, err: (err as Error)?.message },
                'late record: recorded, its start failed',
              ),
            ),
          (err: unknown) =>
            opts.log.warn(
              { ...fields, err: (err as Error)?.message },
              'late record failed; only a redelivery can record the message now',
            ),
        )
        .finally(() => carried.delete(p.idempotencyKey));
      return true;
    },
  };
}
