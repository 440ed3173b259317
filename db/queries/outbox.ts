import type { TransactionSql } from 'postgres';

// Outbox writes made inside the application's own transactions. Claims and receipts are single
// statements in steps.ts (segment_claim, segment_record).

/**
 * Prefix of last_error on a segment that was resent after an unknown outcome (allowResend);
 * segment_record (migration 0015) matches the same literal to keep it after the resend.
 */
const POSSIBLE_DUPLICATE = 'possible_duplicate:';

/** last_error prefix of a resend the provider de-duplicates (WeCom duplicate check): not a duplicate. */
const DEDUPLICATED_RESEND = 'resent_deduplicated:';

/**
 * Marks a segment's unknown-outcome resend as allowed, recording why on the segment: a
 * `possible_duplicate:` (policy resend_possible_duplicate; kept after the resend, see
 * segment_record, migration 0015) or a `resent_deduplicated:` resend the provider de-duplicates.
 */
export async function allowResend(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string; fencingToken: number; reason: string; deduplicated: boolean },
) {
  const note = `${p.deduplicated ? DEDUPLICATED_RESEND : POSSIBLE_DUPLICATE}${p.reason}`;
  const res = await tx`
    update reply_outbox set status = 'retryable', last_error = ${note},
           last_reconciled_at = now(), updated_at = now()
    where tenant_id = ${p.tenantId} and segment_id = ${p.segmentId} and status = 'unknown' and fencing_token = ${p.fencingToken}`;
  return res.count === 1;
}

/**
 * Extends a claimed segment's lease to at least `ms` from now, fenced: false when the segment is no
 * longer `sending` under this fencing token (a newer attempt claimed it, or it was recorded).
 */
export async function extendSegmentLease(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string; fencingToken: number; ms: number },
): Promise<boolean> {
  const res = await tx`
    update reply_outbox
    set lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => ${p.ms / 1000}::float8)),
        updated_at = now()
    where tenant_id = ${p.tenantId} and segment_id = ${p.segmentId} and status = 'sending'
      and fencing_token = ${p.fencingToken}`;
  return res.count === 1;
}

/** A segment's status and fence, to tell whether a receipt whose answer was lost was recorded. */
export async function segmentFence(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string },
): Promise<{ status: string; fencing_token: number; provider_message_id: string | null } | null> {
  const [row] = await tx<{ status: string; fencing_token: number; provider_message_id: string | null }[]>`
    select status, fencing_token, provider_message_id from reply_outbox
    where tenant_id = ${p.tenantId} and segment_id = ${p.segmentId}`;
  return row ?? null;
}
