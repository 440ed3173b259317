import type { Sql } from 'postgres';
import type { InboundMessage, SessionIdentity } from '../../channels/inbound';
import { encodeTuple } from '../../lib/digest';
import type { Channel } from '../../workflows/shared';
import { jsonb } from '../json';

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
  tenant_trace_sampling_rate: number;
  tenant_log_masking_level: 'none' | 'basic' | 'strict';
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

/**
 * Deletes security events older than `retentionSeconds` (database clock), at most `limit` per
 * call (ctid batch over the occurred_at index), so an opportunistic prune stays cheap. One
 * autocommit statement, like the insert. Returns the number deleted.
 */
export async function pruneSecurityEvents(
  sql: Sql,
  p: { retentionSeconds: number; limit: number },
): Promise<number> {
  // Ingress may only insert into the sink; pruning goes through a SECURITY DEFINER function
  // (migration 0021), at least an hour old, oldest first, bounded per call.
  const [row] = await sql<{ n: number }[]>`
    select ingress_security_prune(${p.retentionSeconds}::int, ${p.limit}::int) as n`;
  return row?.n ?? 0;
}

/** Structured, collision-free session identity within one binding (length-prefixed tuple). */
export function sessionIdentityKey(id: SessionIdentity): string {
  return encodeTuple([id.kind, id.externalUserId ?? '', id.externalChatId ?? '', id.externalThreadId ?? '']);
}

export interface RecordMessageParams {
  tenantId: string;
  bindingId: string;
  appId: string;
  /** Used only when this message opens the session. */
  sessionId: string;
  identity: SessionIdentity;
  eventId: string;
  idempotencyKey: string;
  workflowId: string;
  message: InboundMessage;
  payloadDigest: string;
  requestId: string;
  traceId: string | null;
  /** The outcome recorded when the message is accepted (null, or 'unsupported_message'). */
  outcome: string | null;
  /** The tenant's limit; null means unlimited and no rate-limit window is counted. */
  rateLimitRpm: number | null;
}

export interface RecordedMessage {
  kind: 'recorded' | 'duplicate' | 'rate_limited';
  event_id: string;
  /** 'received' when recorded, 'failed' when rate limited, the existing row's status for a duplicate. */
  status: string;
}

/** message_event.kind: a media message executes like a text one (its media are fetched by the execution). */
const storedKindOf = (p: RecordMessageParams) => (p.message.kind === 'unsupported' ? 'unsupported' : 'text');

/**
 * Records an inbound message in one autocommit statement (migrations 0014, 0042): the function drops
 * to tenant_app_writer with the tenant set, counts the rate-limit window, takes the session's next
 * event_seq (opening the session on its first message) and inserts the message; a duplicate
 * consumes neither an event_seq nor a count, so event_seq stays gap-free per session, and returns
 * the existing row instead. Called on the owner pool, never inside a transaction: one round trip on
 * the webhook path.
 */
export async function recordInboundMessage(sql: Sql, p: RecordMessageParams): Promise<RecordedMessage> {
  const [row] = await sql<RecordedMessage[]>`
    select kind, event_id, status from record_inbound_message(
      p_tenant_id => ${p.tenantId},
      p_binding_id => ${p.bindingId},
      p_app_id => ${p.appId},
      p_session_id => ${p.sessionId},
      p_session_kind => ${p.identity.kind},
      p_external_user_id => ${p.identity.externalUserId},
      p_external_chat_id => ${p.identity.externalChatId},
      p_external_thread_id => ${p.identity.externalThreadId},
      p_identity_key => ${sessionIdentityKey(p.identity)},
      p_event_id => ${p.eventId},
      p_external_message_id => ${p.message.externalMessageId},
      p_idempotency_key => ${p.idempotencyKey},
      p_workflow_id => ${p.workflowId},
      p_kind => ${storedKindOf(p)},
      p_payload => ${jsonb(sql, p.message)},
      p_payload_digest => ${p.payloadDigest},
      p_outcome => ${p.outcome},
      p_request_id => ${p.requestId},
      p_trace_id => ${p.traceId},
      p_rate_limit_rpm => ${p.rateLimitRpm})`;
  if (!row) throw new Error('record_inbound_message returned no row');
  return row;
}

/**
 * Records several inbound messages in one autocommit statement: record_inbound_message once per
 * row, in the order given, all committed together (group commit: one transaction, one WAL flush,
 * one round trip for what concurrent webhooks would each have paid). Each row behaves exactly as
 * its own call would (duplicates, rate limit, a session's first message); a later row sees the
 * earlier rows of the batch (a duplicate in the same batch is answered as one). The caller orders
 * the rows so that concurrent batches take session locks in one order (api/ingress/record-batcher.ts);
 * any error rolls the whole batch back. Results come back in the order given.
 * The rows are called in the order given: a lateral call per row of the unnest, which yields its
 * rows in order (WITH ORDINALITY numbers them for the aggregate).
 */
export async function recordInboundMessages(
  sql: Sql,
  ps: readonly RecordMessageParams[],
): Promise<RecordedMessage[]> {
  const col = <T>(f: (p: RecordMessageParams) => T) => ps.map(f);
  // One row of arrays: the aggregate sees every call's result before anything is sent, so an error
  // in a later row reaches the client before any row does (postgres.js, given rows and then an
  // error for one query, miscounts the next query's rows on that connection).
  const [row] = await sql<{ kinds: RecordedMessage['kind'][]; event_ids: string[]; statuses: string[] }[]>`
    select array_agg(r.kind order by a.ord) as kinds, array_agg(r.event_id order by a.ord) as event_ids,
           array_agg(r.status order by a.ord) as statuses
    from unnest(
      ${col((p) => p.tenantId)}::text[], ${col((p) => p.bindingId)}::text[], ${col((p) => p.appId)}::text[],
      ${col((p) => p.sessionId)}::text[], ${col((p) => p.identity.kind)}::text[],
      ${col((p) => p.identity.externalUserId)}::text[], ${col((p) => p.identity.externalChatId)}::text[],
      ${col((p) => p.identity.externalThreadId)}::text[], ${col((p) => sessionIdentityKey(p.identity))}::text[],
      ${col((p) => p.eventId)}::text[], ${col((p) => p.message.externalMessageId)}::text[],
      ${col((p) => p.idempotencyKey)}::text[], ${col((p) => p.workflowId)}::text[],
      ${col(storedKindOf)}::text[],
      ${col((p) => JSON.stringify(p.message))}::text[], ${col((p) => p.payloadDigest)}::text[],
      ${col((p) => p.outcome)}::text[], ${col((p) => p.requestId)}::text[], ${col((p) => p.traceId)}::text[],
      ${col((p) => p.rateLimitRpm)}::bigint[]
    ) with ordinality as a(tenant_id, binding_id, app_id, session_id, session_kind, external_user_id,
                           external_chat_id, external_thread_id, identity_key, event_id, external_message_id,
                           idempotency_key, workflow_id, kind, payload, payload_digest, outcome, request_id,
                           trace_id, rate_limit_rpm, ord)
    cross join lateral record_inbound_message(
      a.tenant_id, a.binding_id, a.app_id, a.session_id, a.session_kind, a.external_user_id, a.external_chat_id,
      a.external_thread_id, a.identity_key, a.event_id, a.external_message_id, a.idempotency_key, a.workflow_id,
      a.kind, a.payload::jsonb, a.payload_digest, a.outcome, a.request_id, a.trace_id, a.rate_limit_rpm) as r`;
  const n = row?.kinds?.length ?? 0;
  if (n !== ps.length) throw new Error(`record_inbound_message returned ${n} rows for ${ps.length}`);
  return row!.kinds.map((kind, i) => ({ kind, event_id: row!.event_ids[i]!, status: row!.statuses[i]! }));
}
