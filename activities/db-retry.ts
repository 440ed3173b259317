import { setTimeout as delay } from 'node:timers/promises';
import { isTransientDbError } from '../db/errors';
import type { Logger } from '../lib/log';
import { regularActivity } from './context';

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 2000;

/**
 * Runs `write` until it succeeds, fails otherwise than transiently (db/errors.ts), or the monotonic
 * deadline `until` (a performance.now() value: the end of the claim that makes the write safe)
 * has passed; pauses from 100 ms doubling to 2 s in between. `write` gets the try number: a miss
 * on a retry may be its own earlier try, committed before the answer was lost.
 *
 * A regular activity stops waiting when it is cancelled (what it must not lose is in its
 * heartbeat); a local one waits on (its result exists nowhere else; the deadline bounds it).
 */
export async function retryTransient<T>(
  write: (tryNo: number) => Promise<T>,
  opts: { until: number; log: Logger; what: string; context: Record<string, unknown> },
): Promise<T> {
  const ctx = regularActivity();
  for (let tryNo = 0, pause = FIRST_PAUSE_MS; ; tryNo++, pause = Math.min(2 * pause, MAX_PAUSE_MS)) {
    try {
      return await write(tryNo);
    } catch (err) {
      const leftMs = opts.until - performance.now();
      if (!isTransientDbError(err) || leftMs <= 0) throw err;
      opts.log.warn(
        {
          ...opts.context,
          tryNo,
          leftMs: Math.round(leftMs),
          err: err instanceof Error ? err.message : String(err),
        },
        `${opts.what}: database unavailable; trying again`,
      );
      const ms = Math.min(pause, leftMs);
      await (ctx ? ctx.sleep(ms) : delay(ms));
    }
  }
}
