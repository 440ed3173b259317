import type { TransactionSql } from 'postgres';
import type { ReplyTarget } from '../../channels/inbound';

export interface ClaimedSegment {
  segment_id: string;
  event_id: string;
  reply_id: string;
  segment_index: number;
  content: string;
  channel: 'telegram' | 'wecom';
  target: ReplyTarget;
  status: string;
  attempts: number;
  fencing_token: number;
  idempotency_key: string;
  binding_id: string;
  created_at: Date;
  last_error: string | null;
  lease_expires_at: Date | null;
}

/**
 * Claims a segment for one send attempt (CAS pending/retryable → sending, or a sending row whose
 * lease expired), with a new fencing token. Returns the current row without claiming when it is
 * already sent or held by a live lease. `takenOver` is true when the claim took over an expired
 * `sending` lease: the attempt that held it may have sent the segment before it was lost, so the
 * caller must treat that as an unknown outcome, never resend blindly.
 */
export async function claimSegment(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string; owner: string; leaseSeconds: number },
): Promise<{ claimed: boolean; takenOver: boolean; row: ClaimedSegment } | null> {
  // The CTE locks the claimable row and remembers its status before the update (under concurrency
  // the row is re-checked after the lock wait, so only one claimer gets it).
  const claimed = await tx<(ClaimedSegment & { previous_status: string })[]>`
    with prev as (
      select segment_id, status as previous_status from reply_outbox
      where tenant_id = ${p.tenantId} and segment_id = ${p.segmentId}
        and (status in ('pending', 'retryable') or (status = 'sending' and lease_expires_at < now()))
      for update
    )
    update reply_outbox o
    set status = 'sending', claim_owner = ${p.owner}, claim_token = gen_random_uuid()::text,
        lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        fencing_token = o.fencing_token + 1, attempts = o.attempts + 1
    from prev, message_event e
    where o.tenant_id = ${p.tenantId} and o.segment_id = prev.segment_id
      and e.tenant_id = o.tenant_id and e.event_id = o.event_id
    returning o.segment_id, o.event_id, o.reply_id, o.segment_index, o.content, o.channel, o.target,
              o.status, o.attempts, o.fencing_token, o.idempotency_key, e.binding_id, o.created_at,
              o.last_error, o.lease_expires_at, prev.previous_status`;
  if (claimed[0]) {
    const { previous_status, ...row } = claimed[0];
    return { claimed: true, takenOver: previous_status === 'sending', row };
  }
  const current = await tx<ClaimedSegment[]>`
    select o.segment_id, o.event_id, o.reply_id, o.segment_index, o.content, o.channel, o.target,
           o.status, o.attempts, o.fencing_token, o.idempotency_key, e.binding_id, o.created_at,
           o.last_error, o.lease_expires_at
    from reply_outbox o join message_event e on e.tenant_id = o.tenant_id and e.event_id = o.event_id
    where o.tenant_id = ${p.tenantId} and o.segment_id = ${p.segmentId}`;
  return current[0] ? { claimed: false, takenOver: false, row: current[0] } : null;
}

export type SegmentRecord =
  | { status: 'sent'; providerMessageId: string }
  | { status: 'retryable'; error: string; retryAfterMs?: number }
  | { status: 'failed'; error: string }
  | { status: 'unknown'; error: string };

/** Prefix of last_error on a segment that was resent after an unknown outcome (allowResend). */
export const POSSIBLE_DUPLICATE = 'possible_duplicate:';

/**
 * Records an attempt's outcome; fenced, so a stale attempt's result is dropped (returns false).
 * A `possible_duplicate:` record stays on the segment for good (a later error is appended to it),
 * so a duplicate the binding's policy allowed remains visible after the resend succeeds.
 */
export async function recordSegmentOutcome(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string; fencingToken: number; outcome: SegmentRecord },
): Promise<boolean> {
  const o = p.outcome;
  const marker = tx`split_part(last_error, ' | ', 1)`;
  const kept = tx`last_error like ${`${POSSIBLE_DUPLICATE}%`}`;
  const res = await tx`
    update reply_outbox
    set status = ${o.status},
        provider_message_id = ${o.status === 'sent' ? o.providerMessageId : null},
        sent_at = ${o.status === 'sent' ? tx`now()` : null},
        last_error = ${
          o.status === 'sent'
            ? tx`case when ${kept} then ${marker} end`
            : tx`case when ${kept} then ${marker} || ' | ' || ${o.error}::text else ${o.error}::text end`
        },
        updated_at = now(),
        next_attempt_at = ${o.status === 'retryable' ? tx`now() + make_interval(secs => ${(o.retryAfterMs ?? 0) / 1000})` : null},
        lease_expires_at = null
    where tenant_id = ${p.tenantId} and segment_id = ${p.segmentId}
      and status = 'sending' and fencing_token = ${p.fencingToken}`;
  return res.count === 1;
}

export interface BindingSecretRow {
  channel: 'telegram' | 'wecom';
  config: Record<string, unknown>;
  secret_ref: string;
  key_id: string;
  ciphertext: Buffer;
}

/** The binding's current channel secret (sealed) and config, for an outbound call. */
export async function bindingSecret(
  tx: TransactionSql,
  tenantId: string,
  bindingId: string,
): Promise<BindingSecretRow | null> {
  const rows = await tx<BindingSecretRow[]>`
    select b.channel, b.config, b.secret_ref, v.key_id, v.ciphertext
    from channel_binding b
    join secret s on s.tenant_id = b.tenant_id and s.secret_ref = b.secret_ref
    join secret_version v on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref and v.version = s.current_version
    where b.tenant_id = ${tenantId} and b.binding_id = ${bindingId}`;
  return rows[0] ?? null;
}

/**
 * Reserves this chat's next send slot (shared by every worker) and returns how long to wait for
 * it. The slot moves forward by the channel's per-chat interval; a provider penalty moves it further.
 */
export async function reserveChatSlot(
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; chatId: string; intervalMs: number },
): Promise<number> {
  const [row] = await tx<{ wait_ms: number }[]>`
    insert into chat_pacing (tenant_id, binding_id, chat_id, next_allowed_at)
    values (${p.tenantId}, ${p.bindingId}, ${p.chatId}, now() + make_interval(secs => ${p.intervalMs / 1000}))
    on conflict (tenant_id, binding_id, chat_id) do update
      set next_allowed_at = greatest(chat_pacing.next_allowed_at, now()) + make_interval(secs => ${p.intervalMs / 1000})
    returning greatest(0, extract(epoch from (next_allowed_at - now())) * 1000 - ${p.intervalMs})::float8 as wait_ms`;
  return Math.ceil(row?.wait_ms ?? 0);
}

/** A provider's rate-limit penalty for this chat: no worker sends to it before it ends. */
export async function penalizeChat(
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; chatId: string; retryAfterMs: number },
) {
  await tx`
    insert into chat_pacing (tenant_id, binding_id, chat_id, next_allowed_at, penalty_until)
    values (${p.tenantId}, ${p.bindingId}, ${p.chatId}, now() + make_interval(secs => ${p.retryAfterMs / 1000}),
            now() + make_interval(secs => ${p.retryAfterMs / 1000}))
    on conflict (tenant_id, binding_id, chat_id) do update
      set next_allowed_at = greatest(chat_pacing.next_allowed_at, excluded.next_allowed_at),
          penalty_until = greatest(chat_pacing.penalty_until, excluded.penalty_until)`;
}

/** last_error prefix of a resend the provider de-duplicates (WeCom duplicate check): not a duplicate. */
export const DEDUPLICATED_RESEND = 'resent_deduplicated:';

/**
 * Marks a segment's unknown-outcome resend as allowed, recording why on the segment: a
 * `possible_duplicate:` (policy resend_possible_duplicate; kept after the resend, see
 * recordSegmentOutcome) or a `resent_deduplicated:` resend the provider de-duplicates.
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
