import type { Sql, TransactionSql } from 'postgres';
import type { InboundMessage, SessionIdentity } from '../../channels/inbound';
import { encodeTuple } from '../../lib/digest';
import type { Channel } from '../../workflows/shared';

/** What the route key alone yields: enough to verify a request, never an authorisation. */
export interface CandidateRow {
  tenant_id: string;
  binding_id: string;
  status: string;
  app_id: string;
  provider_account_id: string;
  config: Record<string, unknown>;
  secret_ref: string;
  secret_key_id: string | null;
  secret_ciphertext: Buffer | null;
  tenant_status: 'active' | 'suspended' | 'disabled';
  tenant_rate_limit_rpm: number | null;
}

/**
 * The only read ingress makes before verification: a SECURITY DEFINER function keyed by the
 * route-key digest, with no tenant context (RLS would hide every tenant-owned row). It is the sole
 * statement, so it runs without a role switch or transaction: one round trip on the hot path.
 */
export async function findBindingCandidate(
  sql: Sql,
  channel: Channel,
  routeKeyDigest: string,
): Promise<CandidateRow | null> {
  const rows = await sql<CandidateRow[]>`
    select * from find_binding_candidate(${channel}, ${routeKeyDigest})`;
  return rows[0] ?? null;
}

/** Tenant-less security sink: request id, route digest and failure class; never a body or secret. */
export async function recordSecurityEvent(
  sql: Sql,
  e: { requestId: string; channel: Channel; routeKeyDigest: string | null; failureClass: string },
): Promise<void> {
  await sql`
    insert into ingress_security_event (request_id, channel, route_key_digest, failure_class)
    values (${e.requestId}, ${e.channel}, ${e.routeKeyDigest}, ${e.failureClass})`;
}

/** Structured, collision-free session identity within one binding (length-prefixed tuple). */
export function sessionIdentityKey(id: SessionIdentity): string {
  return encodeTuple([id.kind, id.externalUserId ?? '', id.externalChatId ?? '', id.externalThreadId ?? '']);
}

export interface ExistingEvent {
  event_id: string;
  status: string;
  idempotency_key: string;
  workflow_id: string | null;
}

export async function findEventByExternalId(
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; externalMessageId: string },
): Promise<ExistingEvent | null> {
  const rows = await tx<ExistingEvent[]>`
    select event_id, status, idempotency_key, workflow_id from message_event
    where tenant_id = ${p.tenantId} and binding_id = ${p.bindingId}
      and external_message_id = ${p.externalMessageId}`;
  return rows[0] ?? null;
}

export interface InsertEventParams {
  tenantId: string;
  bindingId: string;
  appId: string;
  sessionId: string;
  identity: SessionIdentity;
  eventId: string;
  idempotencyKey: string;
  workflowId: string;
  message: InboundMessage;
  payloadDigest: string;
  requestId: string;
  traceId: string | null;
  /** 'failed' records a message decided at ingress (rate limited) that never executes. */
  status: 'received' | 'failed';
  outcome: string | null;
}

/**
 * Upserts the session, allocates the next event_seq and inserts the message, in the caller's
 * transaction. Returns null when the message already exists; the caller then rolls back so the
 * sequence number is not consumed (event_seq stays gap-free per session).
 */
export async function insertReceivedEvent(
  tx: TransactionSql,
  p: InsertEventParams,
): Promise<{ event_id: string; event_seq: number; session_id: string } | null> {
  // One statement (one round trip on the webhook path): the session upsert allocates the next
  // event_seq and the message insert consumes it. A duplicate inserts nothing; the caller then
  // rolls back, which also returns the sequence number.
  const rows = await tx<{ event_id: string; event_seq: number; session_id: string }[]>`
    with s as (
      insert into session (tenant_id, session_id, binding_id, app_id, kind, external_user_id,
                           external_chat_id, external_thread_id, identity_key, last_event_seq)
      values (${p.tenantId}, ${p.sessionId}, ${p.bindingId}, ${p.appId}, ${p.identity.kind},
              ${p.identity.externalUserId}, ${p.identity.externalChatId}, ${p.identity.externalThreadId},
              ${sessionIdentityKey(p.identity)}, 1)
      on conflict (tenant_id, binding_id, identity_key)
      do update set last_event_seq = session.last_event_seq + 1, updated_at = now()
      returning session_id, last_event_seq
    )
    insert into message_event (tenant_id, event_id, session_id, binding_id, external_message_id,
                               idempotency_key, event_seq, kind, payload, payload_digest, status,
                               outcome, request_id, trace_id, workflow_id)
    select ${p.tenantId}, ${p.eventId}, s.session_id, ${p.bindingId}, ${p.message.externalMessageId},
           ${p.idempotencyKey}, s.last_event_seq, ${p.message.kind}, ${tx.json(p.message as never)},
           ${p.payloadDigest}, ${p.status}, ${p.outcome}, ${p.requestId}, ${p.traceId}, ${p.workflowId}
    from s
    on conflict do nothing
    returning event_id, event_seq, session_id`;
  return rows[0] ?? null;
}

/**
 * Counts one message in the tenant's current minute, across every API instance (the row is shared),
 * and returns the count including this one.
 */
export async function countInRateWindow(tx: TransactionSql, tenantId: string): Promise<number> {
  const [row] = await tx<{ count: number }[]>`
    insert into rate_limit_window (tenant_id, window_start, count)
    values (${tenantId}, date_trunc('minute', now()), 1)
    on conflict (tenant_id, window_start) do update set count = rate_limit_window.count + 1
    returning count`;
  // Old windows are never read again; about one request in 64 clears this tenant's.
  if (Math.random() < 1 / 64) {
    await tx`delete from rate_limit_window where tenant_id = ${tenantId} and window_start < now() - interval '10 minutes'`;
  }
  return row?.count ?? 0;
}
