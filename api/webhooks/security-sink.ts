import type { Sql } from 'postgres';
import { pruneSecurityEvents, recordSecurityEvent } from '../../db/queries/ingress';
import { ThresholdSampler } from '../../lib/event-sampler';
import type { Logger } from '../../lib/log';
import type { Channel } from '../../workflows/shared';

/** Per failure class and process: every event up to this many a minute is recorded… */
export const SECURITY_EVENTS_KEPT_PER_MINUTE = 100;
/** …then one in this many (the dropped ones are counted in the log line of the next kept one). */
export const SECURITY_EVENT_SAMPLE_ONE_IN = 100;
/** Rows older than this are pruned. */
export const SECURITY_EVENT_RETENTION_S = 7 * 24 * 3600;
/** One recorded row in this many (the first included) starts a prune… */
export const SECURITY_EVENT_PRUNE_EVERY = 256;
/** …of at most this many rows: more than PRUNE_EVERY, so pruning outpaces recording. */
export const SECURITY_EVENT_PRUNE_LIMIT = 1000;

export interface SecurityEvent {
  requestId: string;
  clientRequestId?: string | undefined;
  channel: Channel;
  routeKeyDigest: string | null;
  /** From a closed set in code (the sampler keeps one counter per class). */
  failureClass: string;
}

export interface SecuritySink {
  /** Records (or samples away) one pre-trust failure; never throws. */
  record(e: SecurityEvent): Promise<void>;
}

/**
 * The tenant-less security sink of one API process: its rows are what an operator needs to spot
 * probing, so a flood must neither grow the table without bound nor cost one insert per request.
 * Sampled per class per minute (lib/event-sampler.ts), pruned to the retention every
 * SECURITY_EVENT_PRUNE_EVERY recorded rows, off the answer path.
 */
export function createSecuritySink(deps: { sql: Sql; log: Logger; now: () => number }): SecuritySink {
  const sampler = new ThresholdSampler({
    keepPerWindow: SECURITY_EVENTS_KEPT_PER_MINUTE,
    oneIn: SECURITY_EVENT_SAMPLE_ONE_IN,
    windowMs: 60_000,
  });
  let recorded = 0;
  return {
    async record(e) {
      const decision = sampler.decide(e.failureClass, deps.now());
      if (!decision.keep) return;
      if (decision.dropped > 0) {
        deps.log.warn(
          { failureClass: e.failureClass, dropped: decision.dropped, requestId: e.requestId },
          'ingress security events sampled: this many of the class were not recorded since the last one',
        );
      }
      if (recorded++ % SECURITY_EVENT_PRUNE_EVERY === 0) {
        void pruneSecurityEvents(deps.sql, {
          retentionSeconds: SECURITY_EVENT_RETENTION_S,
          limit: SECURITY_EVENT_PRUNE_LIMIT,
        }).catch((err: unknown) =>
          deps.log.warn({ err: (err as Error).message }, 'ingress security event prune failed'),
        );
      }
      const { clientRequestId, ...row } = e;
      await recordSecurityEvent(deps.sql, row).catch((err: unknown) =>
        deps.log.error(
          { requestId: e.requestId, client_request_id: clientRequestId, err: (err as Error).message },
          'could not record ingress security event',
        ),
      );
    },
  };
}
