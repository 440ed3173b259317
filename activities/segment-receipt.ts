import { segmentFence } from '../db/queries/outbox';
import { type FinishRow, messageFinish, type SegmentRecord, segmentRecord } from '../db/queries/steps';
import { withTenantTx } from '../db/tx';
import { regularActivity } from './context';
import { retryTransient } from './db-retry';
import type { SegmentDelivery } from './delivery';
import type { ActivityDeps } from './deps';
import { attemptOwner } from './owner';
import { type SendLease, segmentFencedOut } from './segment-lease';

// Recording what a send attempt did. A provider's receipt must reach the database once the provider
// has it: a lost one turns into an unknown outcome (a dead letter, or a possible duplicate) when the
// next attempt takes the segment over. So the record is retried through a database blip while the
// claim's lease lasts, and a regular attempt keeps the receipt in its heartbeat until it is recorded.

/** A provider's receipt for a sent segment under one claim (its fencing token). */
export interface KeptReceipt {
  segmentId: string;
  fencingToken: number;
  providerMessageId: string;
}

/**
 * Keeps a receipt in the regular activity's heartbeat details, so that the next attempt records
 * it (recordKeptReceipt) if this one dies before it could. A local activity has no heartbeat.
 */
export function keepReceipt(receipt: KeptReceipt): void {
  regularActivity()?.heartbeat({ receipt });
}

/**
 * An earlier attempt's receipt for this segment, kept in its heartbeat, recorded under the
 * fencing token it was sent with (segment_record checks the status and the token, not the lease:
 * only this activity's attempts claim the segment, one after another). Returns the delivery when
 * it was recorded now; null when there was none to record or it no longer applies (recorded
 * already, or the segment moved on): the claim that follows finds out which.
 */
export async function recordKeptReceipt(
  deps: ActivityDeps,
  input: { tenantId: string; segmentId: string; finish: boolean },
): Promise<SegmentDelivery | null> {
  const kept = keptReceipt(input.segmentId);
  if (!kept) return null;
  // Kept again for the attempt after this one, should this one die too.
  keepReceipt(kept);
  const res = await segmentRecord(deps.sql, {
    tenantId: input.tenantId,
    segmentId: input.segmentId,
    fencingToken: kept.fencingToken,
    outcome: { status: 'sent', providerMessageId: kept.providerMessageId },
    finish: input.finish,
    actor: attemptOwner(deps.workerId),
  });
  if (!res.ok) return null;
  deps.log.info(
    { tenantId: input.tenantId, segmentId: input.segmentId, fencingToken: kept.fencingToken },
    'recorded the receipt an earlier attempt kept',
  );
  const finished = finishedOf(res.finished);
  return { status: 'sent', ...(finished ? { finished } : {}) };
}

function keptReceipt(segmentId: string): KeptReceipt | null {
  const details: unknown = regularActivity()?.info.heartbeatDetails;
  const r = (details as { receipt?: Partial<KeptReceipt> } | undefined)?.receipt;
  return r?.segmentId === segmentId &&
    typeof r.fencingToken === 'number' &&
    typeof r.providerMessageId === 'string'
    ? { segmentId, fencingToken: r.fencingToken, providerMessageId: r.providerMessageId }
    : null;
}

/**
 * Records the attempt's outcome (fenced) and, with `finish`, the message's terminal transition;
 * returns that transition when it was made. Retried on transient database errors while `lease`
 * lasts; a miss on a retry is ours when the row carries our fence and outcome (the earlier try
 * committed, its answer was lost; the finish, if any, is then left to the workflow).
 */
export async function recordOutcome(
  deps: ActivityDeps,
  tenantId: string,
  seg: { segment_id: string; fencing_token: number },
  outcome: SegmentRecord,
  finish: boolean,
  lease: SendLease,
): Promise<SegmentDelivery['finished'] | undefined> {
  const segmentId = seg.segment_id;
  const res = await retryTransient(
    async (tryNo) => {
      const recorded = await segmentRecord(deps.sql, {
        tenantId,
        segmentId,
        fencingToken: seg.fencing_token,
        outcome,
        finish,
        actor: attemptOwner(deps.workerId),
      });
      if (recorded.ok || tryNo === 0) return recorded;
      const row = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
        segmentFence(tx, { tenantId, segmentId }),
      );
      const ours =
        row?.fencing_token === seg.fencing_token &&
        row.status === outcome.status &&
        (outcome.status !== 'sent' || row.provider_message_id === outcome.providerMessageId);
      return ours ? { ok: true } : recorded;
    },
    { until: lease.endsAt, log: deps.log, what: 'segment receipt', context: { tenantId, segmentId } },
  );
  if (!res.ok) throw segmentFencedOut(segmentId);
  return finishedOf(res.finished);
}

/** The last segment was sent earlier: finish the message now (idempotent). */
export async function finishAfterSent(deps: ActivityDeps, tenantId: string, eventId: string) {
  const finished = finishedOf(
    await messageFinish(deps.sql, { tenantId, eventId, failure: null, actor: attemptOwner(deps.workerId) }),
  );
  return finished ? { finished } : {};
}

/**
 * A terminal transition that was made; not when some segment is still unsent (the workflow decides).
 * The message's outcome goes along when message_finish reports it (for the metrics).
 */
function finishedOf(f: FinishRow | null | undefined): SegmentDelivery['finished'] | undefined {
  if (!f?.status || f.not_all_sent) return undefined;
  return { status: f.status, wake: f.wake, ...(f.outcome !== undefined ? { outcome: f.outcome } : {}) };
}
