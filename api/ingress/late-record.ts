import type { Sql } from 'postgres';
import {
  type RecordedMessage,
  type RecordMessageParams,
  recordInboundMessage,
} from '../../db/queries/ingress';
import type { Logger } from '../../lib/log';

/**
 * Records that ran out of their lock bound (record-batcher.ts INGRESS_LOCK_TIMEOUT_MS) finished in
 * the background on the main pool, without the bound, after their webhook was answered 503: a
 * provider whose redeliveries end before the lock is released (WeCom retries a callback only a few
 * times, seconds apart) would otherwise lose the message. The redelivery that does come finds it
 * recorded (a duplicate). At most `max` wait at once per process (each holds a connection of the
 * main pool while it waits); beyond that the redelivery is the only way in, as before.
 */
export interface LateRecorder {
  /** false: too many already wait (nothing was taken on). */
  submit(p: RecordMessageParams, then: (r: RecordedMessage) => Promise<void>): boolean;
  /** Late records waiting now (tests). */
  waiting(): number;
}

export function createLateRecorder(sql: Sql, opts: { max: number; log: Logger }): LateRecorder {
  let waiting = 0;
  return {
    submit(p, then) {
      if (waiting >= opts.max) return false;
      waiting++;
      void recordInboundMessage(sql, p)
        .then(then)
        .catch((err: unknown) =>
          opts.log.warn(
            { requestId: p.requestId, err: (err as Error)?.message },
            'late record failed; the provider’s redelivery or nothing records it',
          ),
        )
        .finally(() => {
          waiting--;
        });
      return true;
    },
    waiting: () => waiting,
  };
}
