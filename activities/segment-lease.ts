import { ApplicationFailure } from '@temporalio/activity';
import { extendSegmentLease } from '../db/queries/outbox';
import type { ClaimRow } from '../db/queries/steps';
import { withTenantTx } from '../db/tx';
import type { ActivityDeps } from './deps';
import { FENCED_OUT } from './failures';

/** A send attempt's lease: the regular attempt's StartToClose (see claimParams in delivery.ts). */
export const SEND_LEASE_SECONDS = 60;

/**
 * Left on the lease after the worst-case call: the receipt's statement, and a database blip while
 * it is retried (segment-receipt.ts).
 */
export const LEASE_MARGIN_MS = 5000;

/**
 * A claim's lease as this process sees it: `endsAt` (performance.now()) is a moment by which the
 * lease has surely not ended yet. Mutable: an extension moves it.
 */
export interface SendLease {
  endsAt: number;
}

/**
 * The lease of a fresh claim: the earlier of the database's expiry read against this clock (a
 * shorter lease than ours, a clock ahead of the database's) and the lease length counted from
 * `claimedAt`, just before the claim statement was sent (a clock behind, a slow answer). Neither
 * skew nor latency makes it look longer than it is.
 */
export function sendLease(seg: ClaimRow, claimedAt: number): SendLease {
  const byLength = claimedAt + SEND_LEASE_SECONDS * 1000;
  if (!seg.lease_expires_at) return { endsAt: byLength };
  const byExpiry = performance.now() + (seg.lease_expires_at.getTime() - Date.now());
  return { endsAt: Math.min(byLength, byExpiry) };
}

/**
 * How long one send may take at worst, plus the margin for its receipt: WeCom may fetch a token
 * and send, and both again after an expired token (4 calls); Telegram makes one call.
 */
export function worstCaseSendMs(channel: ClaimRow['channel'], sendTimeoutMs: number): number {
  switch (channel) {
    case 'telegram':
      return sendTimeoutMs + LEASE_MARGIN_MS;
    case 'wecom':
      return 4 * sendTimeoutMs + LEASE_MARGIN_MS;
    case 'console':
      return LEASE_MARGIN_MS;
    default: {
      const exhaustive: never = channel;
      return exhaustive;
    }
  }
}

/**
 * Makes sure the lease has `needMs` left, extending it under the attempt's fencing token when it
 * has not: a send must never outlive its lease, or a retry takes the segment over (as an unknown
 * outcome) while it is still on the wire. Throws FencedOut when the claim is no longer ours.
 */
export async function holdLease(
  deps: ActivityDeps,
  tenantId: string,
  seg: ClaimRow,
  lease: SendLease,
  needMs: number,
): Promise<void> {
  if (lease.endsAt - performance.now() >= needMs) return;
  const ms = Math.ceil(needMs);
  const sentAt = performance.now();
  const held = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    extendSegmentLease(tx, { tenantId, segmentId: seg.segment_id, fencingToken: seg.fencing_token, ms }),
  );
  if (!held) throw segmentFencedOut(seg.segment_id);
  lease.endsAt = sentAt + ms;
}

/** A write refused because a newer attempt claimed the segment: its result stands, not ours. */
export function segmentFencedOut(segmentId: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`segment ${segmentId} was claimed by a newer attempt`, FENCED_OUT);
}
