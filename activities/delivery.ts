import { ApplicationFailure, sleep } from '@temporalio/activity';
import { consoleSend } from '../channels/console/client';
import { type SendResult, sendResultClass } from '../channels/send-result';
import { TELEGRAM_API_BASE, telegramSendMessage } from '../channels/telegram/client';
import { WECOM_API_BASE, wecomSendText } from '../channels/wecom/client';
import { insertDeadLetter } from '../db/queries/dead-letters';
import { reserveNextSlot } from '../db/queries/live-drafts';
import { allowResend } from '../db/queries/outbox';
import { type ClaimParams, type ClaimRow, type SegmentRecord, segmentClaim } from '../db/queries/steps';
import { withTenantTx } from '../db/tx';
import { secretAad } from '../lib/secret-box';
import { recordFinish } from '../telemetry/metrics';
import type { MessageStatus } from '../workflows/shared';
import type { ActivityDeps } from './deps';
import { segmentDraftOf, sendThroughDraft } from './live-drafts';
import { isAttachmentSegment, sendAttachment } from './media-out';
import { attemptOwner } from './owner';
import { holdLease, LEASE_MARGIN_MS, SEND_LEASE_SECONDS, sendLease, worstCaseSendMs } from './segment-lease';
import { finishAfterSent, keepReceipt, recordKeptReceipt, recordOutcome } from './segment-receipt';

export interface SegmentDelivery {
  status: 'sent' | 'failed' | 'unknown';
  reasonClass?: string;
  deadLettered?: boolean;
  /**
   * The message's terminal transition, when this was its last segment and it is sent; `outcome`
   * only when message_finish reports it (the metrics use it; the workflow does not).
   */
  finished?: { status: MessageStatus; wake: string[]; outcome?: string | null };
}

/**
 * Per-chat pacing, below the providers' limits, by "channel/chatType": Telegram ~1 message/s in a
 * private chat and 20/min in a group; WeCom 30/min per member. The console has no provider to
 * protect: unpaced.
 */
export const CHAT_INTERVALS_MS = {
  'telegram/direct': 1100,
  'telegram/group': 3100,
  'wecom/direct': 2000,
  'wecom/group': 2000,
  'console/direct': 0,
  'console/group': 0,
} as const;

/** A segment older than this when claimed after a restart is parked, not sent hours late. */
const MAX_SEGMENT_AGE_MS = 24 * 3600 * 1000;
/** Pacing waits longer than this give the slot back to Temporal as a retry delay instead. */
const MAX_INLINE_WAIT_MS = 20_000;
/**
 * The quick attempt runs while its workflow task is open (holding one of the worker's task slots),
 * so it only takes a segment whose chat is free now or nearly; a paced one goes to the regular
 * attempt, which waits for the slot in an activity.
 */
const QUICK_MAX_INLINE_WAIT_MS = 250;

export function deliveryActivities(deps: ActivityDeps) {
  return {
    /**
     * Sends one outbox segment: claim (owner, lease, new fence) and reserve the chat's send slot →
     * pace → send with the segment's stable idempotency key → record the receipt (fenced CAS) and,
     * for the last segment (`finish`), the message's terminal transition with it. Retryable answers
     * throw so Temporal retries with back-off, using the provider's retry_after as the next delay;
     * permanent refusals and unconfirmable outcomes go to the DLQ, never into a retry loop or a
     * blind resend. A receipt this activity's earlier attempt kept in its heartbeat, but did not
     * record before it died, is recorded first (segment-receipt.ts).
     */
    async sendReplySegment(input: {
      tenantId: string;
      eventId: string;
      segmentId: string;
      /** The reply's last segment: finish the message once it is sent. */
      finish?: boolean;
      /** The workflow's quick first attempt (a local activity): it declines a chat that is paced. */
      quick?: boolean;
    }): Promise<SegmentDelivery> {
      const finish = input.finish ?? false;
      // An earlier attempt of this activity sent the segment and died before recording it.
      const kept = await recordKeptReceipt(deps, {
        tenantId: input.tenantId,
        segmentId: input.segmentId,
        finish,
      });
      if (kept) {
        if (kept.finished) {
          const { status, outcome } = kept.finished;
          recordFinish(deps.metrics, { status, outcome, eventId: input.eventId });
        }
        return kept;
      }
      const claimedAt = performance.now();
      const seg = await segmentClaim(deps.sql, {
        tenantId: input.tenantId,
        segmentId: input.segmentId,
        ...claimParams(attemptOwner(deps.workerId), input.quick ?? false),
      });
      if (!seg) throw ApplicationFailure.nonRetryable(`segment ${input.segmentId} not found`, 'NotFound');
      return sendClaimed(
        deps,
        { tenantId: input.tenantId, finish, quick: input.quick ?? false, claimedAt },
        seg,
      );
    },

    /** A segment whose retries are exhausted: failed, kept, and visible in the DLQ. */
    async parkSegment(input: {
      tenantId: string;
      eventId: string;
      segmentId: string;
      reasonClass: string;
    }): Promise<SegmentDelivery> {
      return withTenantTx(deps.sql, asApp(input.tenantId), async (tx): Promise<SegmentDelivery> => {
        // A segment still `sending` under a live lease may be in flight right now (the attempt that
        // timed out last can still be talking to the provider): its outcome is unknown, not failed.
        const [row] = await tx<{ status: string; attempts: number }[]>`
          update reply_outbox
          set status = case when status = 'sending' and lease_expires_at > now() then 'unknown' else 'failed' end,
              last_error = ${input.reasonClass}, lease_expires_at = null, updated_at = now()
          where tenant_id = ${input.tenantId} and segment_id = ${input.segmentId} and status in ('pending', 'retryable', 'sending')
          returning status, attempts`;
        const current =
          row ??
          (
            await tx<{ status: string; attempts: number }[]>`
              select status, attempts from reply_outbox where tenant_id = ${input.tenantId} and segment_id = ${input.segmentId}`
          )[0];
        const reasonClass = current?.status === 'unknown' ? 'unknown_outcome' : input.reasonClass;
        // The last attempt's send was recorded after all (its result reached the database, not Temporal).
        if (current?.status === 'sent') return { status: 'sent' };
        await insertDeadLetter(tx, {
          tenantId: input.tenantId,
          // Per attempt count, like park(): a later DLQ-retry run that is parked again gets a new,
          // open dead letter instead of colliding with the retried one.
          deadLetterId: `dl_${input.segmentId.slice(4)}_${current?.attempts ?? 0}`,
          eventId: input.eventId,
          kind: 'segment',
          segmentId: input.segmentId,
          reasonClass,
        });
        return {
          status: reasonClass === 'unknown_outcome' ? 'unknown' : 'failed',
          reasonClass,
          deadLettered: true,
        };
      });
    },
  };
}

/**
 * The claim parameters of a send attempt. The lease is the regular attempt's StartToClose (60 s)
 * for the quick attempt too: its local activity times out sooner, but a send already on the wire
 * is not stopped by that, and the segment must not be taken over (as an unknown outcome) while it
 * may still be recorded. A send that could outlive the lease extends it first (holdLease), and a
 * receipt is recorded while it lasts (segment-receipt.ts). The quick attempt holds its workflow
 * task open, so it takes the segment only when the chat's slot is (nearly) free; else it leaves
 * it, unclaimed and with no slot reserved.
 */
export function claimParams(owner: string, quick: boolean): ClaimParams {
  return {
    owner,
    leaseSeconds: SEND_LEASE_SECONDS,
    intervalsMs: CHAT_INTERVALS_MS,
    maxWaitMs: quick ? QUICK_MAX_INLINE_WAIT_MS : null,
  };
}

/**
 * Everything after segment_claim: sends a claimed segment (pace → send → record the receipt, and
 * with `finish` the message's terminal transition), or settles one that was not claimed (sent or
 * discarded already, failed or unknown to park or resolve, paced or busy to retry later). Shared
 * by sendReplySegment and the activity that commits a reply and claims its first segment with it;
 * `claimedAt` is performance.now() just before the claim statement was sent (see sendLease).
 */
export async function sendClaimed(
  deps: ActivityDeps,
  input: {
    tenantId: string;
    finish: boolean;
    quick: boolean;
    claimedAt: number;
    /** The reply's outcome, when the caller committed it (for the metrics; absent: not known here). */
    outcome?: string | null;
  },
  seg: ClaimRow,
): Promise<SegmentDelivery> {
  const { finish } = input;
  const maxInlineWaitMs = input.quick ? QUICK_MAX_INLINE_WAIT_MS : MAX_INLINE_WAIT_MS;
  const secret = sealedSecretOf(seg);
  // The console has no provider and so no secret (segment_claim returns none for it).
  const needsSecret = seg.channel !== 'console';
  if (!seg.claimed) {
    if (seg.status === 'sent') {
      // Sent by an earlier attempt whose result reached the database but not Temporal.
      return {
        status: 'sent',
        ...(finish ? await finishAfterSent(deps, input.tenantId, seg.event_id) : {}),
      };
    }
    if (seg.status === 'discarded') return { status: 'failed', reasonClass: 'discarded' };
    if (seg.status === 'pending' || seg.status === 'retryable') {
      // Left to the regular attempt (see claimParams): nothing was claimed or reserved.
      throw ApplicationFailure.create({
        message: 'chat is paced',
        type: 'Paced',
        nextRetryDelay: Math.max(1, Math.ceil(seg.wait_ms)),
      });
    }
    // Failed by an earlier attempt that may have died before parking it: park it (idempotent,
    // the dead letter id is derived from the segment and its attempt).
    if (seg.status === 'failed') return park(deps, input.tenantId, seg, failedReason(seg.last_error));
    if (seg.status === 'unknown') {
      // An unknown outcome left unresolved (the attempt that recorded it died before parking
      // or allowing the resend) is resolved again, with the binding's policy.
      if (!secret && needsSecret) return park(deps, input.tenantId, seg, 'unknown_outcome');
      return resolveUnknown(deps, input.tenantId, seg, secret?.config ?? {}, 'unknown_outcome');
    }
    // Another attempt holds a live lease: retry once it has expired.
    const leaseLeftMs = (seg.lease_expires_at?.getTime() ?? 0) - Date.now();
    throw ApplicationFailure.create({
      message: `segment ${seg.segment_id} is ${seg.status}`,
      type: 'SegmentBusy',
      nextRetryDelay: Math.max(1000, leaseLeftMs + 500),
    });
  }
  const lease = sendLease(seg, input.claimedAt);
  const record = (outcome: SegmentRecord) => recordOutcome(deps, input.tenantId, seg, outcome, false, lease);
  if (!secret && needsSecret) {
    await record({ status: 'failed', error: 'binding_secret_missing' });
    return park(deps, input.tenantId, seg, 'binding_secret_missing');
  }
  // The message's live draft, when this segment finishes it (the reply's first text segment) or
  // the reply has no text to finish it with (activities/live-drafts.ts).
  const draft = await segmentDraftOf(deps, input.tenantId, seg);
  if (seg.taken_over && draft?.kind !== 'finish') {
    // The attempt whose lease expired (its worker died, or it outlived its lease) may have sent
    // the segment: an unknown outcome, resolved by the binding's policy, never a blind resend.
    // (A segment that finishes a draft was only ever edited into it, which is safe to repeat.)
    await record({ status: 'unknown', error: 'lease_expired' });
    return resolveUnknown(deps, input.tenantId, seg, secret?.config ?? {}, 'lease_expired');
  }
  if (Date.now() - seg.created_at.getTime() > MAX_SEGMENT_AGE_MS) {
    await record({ status: 'failed', error: 'stale_reply' });
    return park(deps, input.tenantId, seg, 'stale_reply');
  }
  const waitMs = Math.ceil(seg.wait_ms);
  if (waitMs > maxInlineWaitMs) {
    await record({ status: 'retryable', error: 'paced' });
    throw ApplicationFailure.create({ message: 'chat is paced', type: 'Paced', nextRetryDelay: waitMs });
  }
  let plaintext: Record<string, unknown> = {};
  try {
    await holdLease(
      deps,
      input.tenantId,
      seg,
      lease,
      waitMs + worstCaseSendMs(seg.channel, deps.sendTimeoutMs),
    );
    if (waitMs > 0) await sleep(waitMs);
    if (secret) {
      plaintext = JSON.parse(
        deps.secrets.open(secret.ciphertext, secretAad(input.tenantId, secret.secretRef), secret.keyId),
      ) as Record<string, unknown>;
    }
  } catch (err) {
    // Interrupted before anything was sent (the lease could not be held, cancelled during the
    // pacing wait, or the secret does not open): say so, or the next attempt would take the claim
    // over as an unknown outcome.
    await record({ status: 'retryable', error: 'interrupted' }).catch(() => undefined);
    throw err;
  }
  const sendStarted = performance.now();
  // An attachment segment (activities/media-out.ts) uploads its artifact; the rest is the same.
  const sendNew = () =>
    isAttachmentSegment(seg.segment_id)
      ? sendAttachment(deps, input.tenantId, seg, secret?.config ?? {}, plaintext)
      : send(deps, seg, secret?.config ?? {}, plaintext);
  const result = draft
    ? await sendThroughDraft(deps, {
        tenantId: input.tenantId,
        seg,
        draft,
        secret: plaintext,
        holdLease: (callMs) => holdLease(deps, input.tenantId, seg, lease, callMs + LEASE_MARGIN_MS),
        // The claimed slot (and the lease's send time) went to the draft's edit: the segment's
        // message takes the chat's next slot, and the lease must cover that wait and a whole send.
        fallback: async () => {
          const paceMs = await withTenantTx(deps.sql, asApp(input.tenantId), (tx) =>
            reserveNextSlot(tx, {
              tenantId: input.tenantId,
              bindingId: seg.binding_id,
              chatId: seg.target.chatId,
              intervalMs: CHAT_INTERVALS_MS[`${seg.channel}/${seg.target.chatType}`],
            }),
          );
          if (paceMs > maxInlineWaitMs) {
            await record({ status: 'retryable', error: 'paced' });
            throw ApplicationFailure.create({
              message: 'chat is paced',
              type: 'Paced',
              nextRetryDelay: paceMs,
            });
          }
          await holdLease(
            deps,
            input.tenantId,
            seg,
            lease,
            paceMs + worstCaseSendMs(seg.channel, deps.sendTimeoutMs),
          );
          if (paceMs > 0) await sleep(paceMs);
          return sendNew();
        },
      })
    : await sendNew();
  if (deps.metrics) {
    const labels = { channel: seg.channel, result: sendResultClass(result) };
    deps.metrics.segmentSends.inc(labels);
    deps.metrics.segmentSendSeconds.observe(labels, (performance.now() - sendStarted) / 1000);
  }

  switch (result.kind) {
    case 'sent': {
      const { providerMessageId } = result;
      keepReceipt({ segmentId: seg.segment_id, fencingToken: seg.fencing_token, providerMessageId });
      const finished = await recordOutcome(
        deps,
        input.tenantId,
        seg,
        { status: 'sent', providerMessageId },
        finish,
        lease,
      );
      if (finished) {
        recordFinish(deps.metrics, {
          status: finished.status,
          outcome: finished.outcome !== undefined ? finished.outcome : input.outcome,
          eventId: seg.event_id,
          channel: seg.channel,
        });
      }
      return { status: 'sent', ...(finished ? { finished } : {}) };
    }
    case 'retryable':
      // The provider's retry_after also becomes the chat's penalty (in the same statement).
      await record({ status: 'retryable', error: result.reasonClass, retryAfterMs: result.retryAfterMs });
      throw ApplicationFailure.create({
        message: `send failed: ${result.reasonClass}`,
        type: 'ProviderRetryable',
        nextRetryDelay: result.retryAfterMs,
      });
    case 'permanent':
      await record({ status: 'failed', error: result.reasonClass });
      return park(deps, input.tenantId, seg, result.reasonClass);
    case 'unknown':
      await record({ status: 'unknown', error: result.reasonClass });
      return resolveUnknown(deps, input.tenantId, seg, secret?.config ?? {}, result.reasonClass);
    default: {
      const exhaustive: never = result;
      return exhaustive;
    }
  }
}

async function send(
  deps: ActivityDeps,
  seg: ClaimRow,
  config: Record<string, unknown>,
  secret: Record<string, unknown>,
): Promise<SendResult> {
  const base = (fallback: string) =>
    typeof config.api_base_url === 'string' ? config.api_base_url : fallback;
  switch (seg.channel) {
    case 'telegram':
      return telegramSendMessage({
        apiBaseUrl: base(TELEGRAM_API_BASE),
        botToken: String(secret.bot_token ?? ''),
        chatId: seg.target.chatId,
        threadId: seg.target.threadId,
        text: seg.content,
        timeoutMs: deps.sendTimeoutMs,
      });
    case 'wecom':
      return wecomSendText({
        apiBaseUrl: base(WECOM_API_BASE),
        corpId: String(config.corp_id ?? ''),
        corpSecret: String(secret.corp_secret ?? ''),
        agentId: Number(config.agent_id),
        target: seg.target,
        text: seg.content,
        timeoutMs: deps.sendTimeoutMs,
      });
    case 'console':
      return consoleSend({ segmentId: seg.segment_id });
    default: {
      const exhaustive: never = seg.channel;
      return exhaustive;
    }
  }
}

/**
 * A send that may or may not have been applied. WeCom de-duplicates identical content within the
 * duplicate-check interval, so a resend is safe. Telegram has no idempotency key and no read-back:
 * the binding's policy decides — `dlq` (default: parked for an operator) or
 * `resend_possible_duplicate` (resent, and the possible duplicate is recorded on the segment). A
 * console segment reached nobody: recording it again is safe.
 */
async function resolveUnknown(
  deps: ActivityDeps,
  tenantId: string,
  seg: ClaimRow,
  config: Record<string, unknown>,
  reasonClass: string,
): Promise<SegmentDelivery> {
  // WeCom documents duplicate checking for message/send (direct), not for appchat/send (groups).
  // An attachment is uploaded again on a resend (a new media_id): WeCom would not see a duplicate.
  const wecomDeduplicates =
    seg.channel === 'wecom' && seg.target.chatType === 'direct' && !isAttachmentSegment(seg.segment_id);
  const deduplicated = wecomDeduplicates || seg.channel === 'console';
  const resend = deduplicated || config.unknown_send_policy === 'resend_possible_duplicate';
  if (!resend) return park(deps, tenantId, seg, 'unknown_outcome', { cause: reasonClass });
  await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    allowResend(tx, {
      tenantId,
      segmentId: seg.segment_id,
      fencingToken: seg.fencing_token,
      reason: reasonClass,
      deduplicated,
    }),
  );
  deps.log.warn(
    { tenantId, segmentId: seg.segment_id, channel: seg.channel, reasonClass },
    'unknown send outcome; resending',
  );
  throw ApplicationFailure.create({
    message: `unknown outcome (${reasonClass}); resending`,
    type: 'UnknownOutcomeResend',
  });
}

const asApp = (tenantId: string) => ({ role: 'tenant_app_writer' as const, tenantId });

/** The binding's config and sealed channel secret from a claim, when segment_claim returned them. */
function sealedSecretOf(seg: ClaimRow) {
  const { config, ciphertext, key_id: keyId, secret_ref: secretRef } = seg;
  return config && ciphertext && keyId && secretRef ? { config, ciphertext, keyId, secretRef } : null;
}

/** The reason class recorded on a failed segment, if it is one (else the generic 'permanent'). */
function failedReason(lastError: string | null): string {
  return lastError && /^[a-z][a-z0-9_]{0,63}$/.test(lastError) ? lastError : 'permanent';
}

async function park(
  deps: ActivityDeps,
  tenantId: string,
  seg: ClaimRow,
  reasonClass: string,
  detail: Record<string, unknown> = {},
): Promise<SegmentDelivery> {
  await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    insertDeadLetter(tx, {
      tenantId,
      deadLetterId: `dl_${seg.segment_id.slice(4)}_${seg.attempts}`,
      eventId: seg.event_id,
      kind: 'segment',
      segmentId: seg.segment_id,
      reasonClass,
      detail: { ...detail, attempts: seg.attempts, channel: seg.channel },
    }),
  );
  return {
    status: reasonClass === 'unknown_outcome' ? 'unknown' : 'failed',
    reasonClass,
    deadLettered: true,
  };
}
