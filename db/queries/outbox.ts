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
}

/**
 * Claims a segment for one send attempt (CAS pending/retryable → sending, or a sending row whose
 * lease expired), with a new fencing token. Returns the current row without claiming when it is
 * already sent or held by a live lease.
 */
export async function claimSegment(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string; owner: string; leaseSeconds: number },
): Promise<{ claimed: boolean; row: ClaimedSegment } | null> {
  const claimed = await tx<ClaimedSegment[]>`
    update reply_outbox o
    set status = 'sending', claim_owner = ${p.owner}, claim_token = gen_random_uuid()::text,
        lease_expires_at = now() + make_interval(secs => ${p.leaseSeconds}),
        fencing_token = o.fencing_token + 1, attempts = o.attempts + 1
    from message_event e
    where o.tenant_id = ${p.tenantId} and o.segment_id = ${p.segmentId}
      and e.tenant_id = o.tenant_id and e.event_id = o.event_id
      and (o.status in ('pending', 'retryable') or (o.status = 'sending' and o.lease_expires_at < now()))
    returning o.segment_id, o.event_id, o.reply_id, o.segment_index, o.content, o.channel, o.target,
              o.status, o.attempts, o.fencing_token, o.idempotency_key, e.binding_id`;
  if (claimed[0]) return { claimed: true, row: claimed[0] };
  const current = await tx<ClaimedSegment[]>`
    select o.segment_id, o.event_id, o.reply_id, o.segment_index, o.content, o.channel, o.target,
           o.status, o.attempts, o.fencing_token, o.idempotency_key, e.binding_id
    from reply_outbox o join message_event e on e.tenant_id = o.tenant_id and e.event_id = o.event_id
    where o.tenant_id = ${p.tenantId} and o.segment_id = ${p.segmentId}`;
  return current[0] ? { claimed: false, row: current[0] } : null;
}

export type SegmentRecord =
  | { status: 'sent'; providerMessageId: string }
  | { status: 'retryable'; error: string; retryAfterMs?: number }
  | { status: 'failed'; error: string }
  | { status: 'unknown'; error: string };

/** Records an attempt's outcome; fenced, so a stale attempt's result is dropped (returns false). */
export async function recordSegmentOutcome(
  tx: TransactionSql,
  p: { tenantId: string; segmentId: string; fencingToken: number; outcome: SegmentRecord },
): Promise<boolean> {
  const o = p.outcome;
  const res = await tx`
    update reply_outbox
    set status = ${o.status},
        provider_message_id = ${o.status === 'sent' ? o.providerMessageId : null},
        sent_at = ${o.status === 'sent' ? tx`now()` : null},
        last_error = ${o.status === 'sent' ? null : o.error},
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
