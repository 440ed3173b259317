import { createHmac } from 'node:crypto';
import type { TransactionSql } from 'postgres';
import type { Channel } from '../../workflows/shared';
import { newId } from '../ids';
import { jsonb } from '../json';

// The per-tenant audit hash chain, kept by the database (migration 0013: audit_append computes
// seq, link and digest; migration 0030: audit_seal does the same for entries that waited in
// audit_pending). The admin API (tenant_admin_writer) appends synchronously through appendAudit,
// under the chain's lock until its transaction ends; the worker (tenant_app_writer) enqueues
// through enqueueAudit or its step functions, without that lock, and a sealer links its entries
// into the chain later (db/queries/audit-seal.ts). Either way the caller's transaction must
// already carry `app.tenant_id` = entry.tenantId (the functions and RLS reject anything else).

/** What a caller records; everything optional is stored as NULL when absent. */
export interface AuditEntry {
  tenantId: string;
  action: string;
  actorType: string;
  actorId: string;
  reason?: string | null;
  bindingId?: string | null;
  channel?: Channel | null;
  userId?: string | null;
  sessionId?: string | null;
  agentAppId?: string | null;
  revision?: number | null;
  modelProfileId?: string | null;
  toolName?: string | null;
  decision?: string | null;
  eventSeq?: number | null;
  latencyMs?: number | null;
  errorType?: string | null;
  costMinor?: number | null;
  requestId?: string | null;
  traceId?: string | null;
  beforeVersion?: number | null;
  afterVersion?: number | null;
  /** Ids and classes only: never values, bodies or secrets. */
  details?: Record<string, unknown>;
}

/** A stored audit row as the chain sees it (occurred_at in its canonical textual form). */
export interface AuditRecord {
  tenant_id: string;
  audit_id: string;
  seq: number;
  action: string;
  actor_type: string;
  actor_id: string;
  reason: string | null;
  binding_id: string | null;
  channel: string | null;
  user_id: string | null;
  session_id: string | null;
  agent_app_id: string | null;
  revision: number | null;
  model_profile_id: string | null;
  tool_name: string | null;
  decision: string | null;
  event_seq: number | null;
  latency_ms: number | null;
  error_type: string | null;
  cost_minor: number | null;
  request_id: string | null;
  trace_id: string | null;
  before_version: number | null;
  after_version: number | null;
  details: Record<string, unknown>;
  occurred_at: string;
  previous_digest: string | null;
  digest: string;
}

/** occurred_at as audit_digest hashes it (UTC, microseconds): a JS Date would drop the microseconds. */
const TS_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';

/**
 * Appends one entry to the tenant's chain inside the caller's transaction (one statement) and
 * returns the stored row. The database assigns seq, occurred_at, previous_digest and the digest
 * (audit_append, migration 0013) under a per-tenant lock held until the transaction ends.
 */
export async function appendAudit(tx: TransactionSql, e: AuditEntry): Promise<AuditRecord> {
  const [row] = await tx<AuditRecord[]>`
    select ${auditColumns(tx)} from audit_append(${jsonb(tx, auditEntryJson(e))})`;
  if (!row) throw new Error('audit_append returned nothing');
  return row;
}

/** What enqueueAudit returns: the entry's place in the tenant's queue of unsealed entries. */
export interface PendingAuditRecord {
  pending_id: number;
  audit_id: string;
}

/**
 * Records one entry for the tenant's chain inside the caller's transaction, unsealed: no lock, so
 * concurrent writers of one tenant do not wait for each other's commits. It exists only if the
 * transaction commits; the sealer then links it into the chain (audit_seal, migration 0030), and
 * until then verification counts it as pending, never as checked.
 */
export async function enqueueAudit(tx: TransactionSql, e: AuditEntry): Promise<PendingAuditRecord> {
  const [row] = await tx<PendingAuditRecord[]>`
    select pending_id, audit_id from audit_enqueue(${jsonb(tx, auditEntryJson(e))})`;
  if (!row) throw new Error('audit_enqueue returned nothing');
  return row;
}

/** The entry as audit_append and audit_enqueue take it: audit_log's column names, absent values as null. */
function auditEntryJson(e: AuditEntry): Record<string, unknown> {
  return {
    tenant_id: e.tenantId,
    audit_id: newId('aud'),
    action: e.action,
    actor_type: e.actorType,
    actor_id: e.actorId,
    reason: e.reason ?? null,
    binding_id: e.bindingId ?? null,
    channel: e.channel ?? null,
    user_id: e.userId ?? null,
    session_id: e.sessionId ?? null,
    agent_app_id: e.agentAppId ?? null,
    revision: e.revision ?? null,
    model_profile_id: e.modelProfileId ?? null,
    tool_name: e.toolName ?? null,
    decision: e.decision ?? null,
    event_seq: e.eventSeq ?? null,
    latency_ms: e.latencyMs ?? null,
    error_type: e.errorType ?? null,
    cost_minor: e.costMinor ?? null,
    request_id: e.requestId ?? null,
    trace_id: e.traceId ?? null,
    before_version: e.beforeVersion ?? null,
    after_version: e.afterVersion ?? null,
    details: e.details ?? {},
  };
}

/** Every column of audit_log, with occurred_at rendered as the chain hashes it. */
export function auditColumns(tx: TransactionSql) {
  return tx`
    tenant_id, audit_id, seq, action, actor_type, actor_id, reason, binding_id, channel, user_id,
    session_id, agent_app_id, revision, model_profile_id, tool_name, decision, event_seq, latency_ms,
    error_type, cost_minor, request_id, trace_id, before_version, after_version, details,
    to_char(occurred_at at time zone 'UTC', ${TS_FORMAT}) as occurred_at, previous_digest, digest`;
}

export interface AuditVerification {
  /** the sealed chain (from the starting point) and every pending entry's mac hold */
  valid: boolean;
  /** sealed rows checked (after the starting point, when verification started from one) */
  checked: number;
  /** entries not yet sealed: their macs were checked, but they are not part of what `valid` vouches for */
  pending: number;
  /**
   * pending entries whose mac does not hold (edited, or written without the key): never sealed, they
   * stop the tenant's sealing until an operator quarantines them (quarantinePendingAudit)
   */
  refused: number;
  first_invalid?: string;
  /** the last row checked and found valid: where a later verification may start */
  head?: { seq: number; digest: string };
}

/**
 * The text each chain digest is the HMAC of, built in the query from the stored columns exactly as
 * audit_digest (migration 0021) builds it on append. Verification hashes it here, in the
 * application, with the key: a database function could be replaced by whoever controls the
 * database, this query text cannot.
 */
function canonicalText(tx: TransactionSql) {
  return tx`jsonb_build_object(
    'chain', 'switchyard.audit.v3', 'tenant_id', tenant_id, 'audit_id', audit_id, 'seq', seq,
    'action', action, 'actor_type', actor_type, 'actor_id', actor_id, 'reason', reason,
    'binding_id', binding_id, 'channel', channel, 'user_id', user_id, 'session_id', session_id,
    'agent_app_id', agent_app_id, 'revision', revision, 'model_profile_id', model_profile_id,
    'tool_name', tool_name, 'decision', decision, 'event_seq', event_seq, 'latency_ms', latency_ms,
    'error_type', error_type, 'cost_minor', cost_minor, 'request_id', request_id, 'trace_id', trace_id,
    'before_version', before_version, 'after_version', after_version, 'details', details,
    'occurred_at', to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    'previous_digest', previous_digest)::text`;
}

/** The text a pending entry's mac is the HMAC of, as audit_pending_canonical (migration 0030) builds it. */
function pendingCanonicalText(tx: TransactionSql) {
  return tx`jsonb_build_object(
    'chain', 'switchyard.audit.v3.pending', 'pending_id', pending_id, 'tenant_id', tenant_id,
    'audit_id', audit_id, 'action', action, 'actor_type', actor_type, 'actor_id', actor_id,
    'reason', reason, 'binding_id', binding_id, 'channel', channel, 'user_id', user_id,
    'session_id', session_id, 'agent_app_id', agent_app_id, 'revision', revision,
    'model_profile_id', model_profile_id, 'tool_name', tool_name, 'decision', decision,
    'event_seq', event_seq, 'latency_ms', latency_ms, 'error_type', error_type,
    'cost_minor', cost_minor, 'request_id', request_id, 'trace_id', trace_id,
    'before_version', before_version, 'after_version', after_version, 'details', details,
    'occurred_at', to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text`;
}

const keyedDigest = (auditKey: string, canonical: string) =>
  createHmac('sha256', Buffer.from(auditKey, 'hex')).update(canonical, 'utf8').digest('hex');

/**
 * Walks the tenant's chain in seq order and recomputes every digest (the keyed HMAC, here, from the
 * stored columns) and link. A modified row fails its own digest; a deleted row breaks the seq
 * continuity and the next row's link; a reordered or re-linked row fails both; a row written
 * without the key fails its digest. Reports the first broken row and stops there.
 * `from` (a checkpoint whose signature the caller checked) starts the walk after the row at
 * from.seq, which must still exist, carry from.digest and recompute to it — unless `removed` says
 * retention removed the rows up to there (then the next row must link to from.digest).
 * Entries still pending (not yet sealed) are counted in `pending`, never in `checked`; each one's
 * mac is recomputed too, so an edited or forged pending entry fails verification (the first one as
 * `first_invalid` when the sealed chain holds) and is counted in `refused`. Run it in one snapshot (REPEATABLE READ):
 * a sealer committing midway would otherwise move rows from one table to the other under the walk.
 */
export async function verifyAuditChain(
  tx: TransactionSql,
  tenantId: string,
  auditKey: string,
  from?: { seq: number; digest: string; removed?: boolean },
): Promise<AuditVerification> {
  let checked = 0;
  const { pending, refused, firstRefused } = await checkPendingAudit(tx, tenantId, auditKey);
  const counts = { pending, refused };
  let seq = from?.seq ?? 0;
  let previous: string | null = from?.digest ?? null;
  if (from && !from.removed) {
    const [anchor] = await tx<{ audit_id: string; digest: string; canonical: string }[]>`
      select audit_id, digest, ${canonicalText(tx)} as canonical
      from audit_log where tenant_id = ${tenantId} and seq = ${from.seq}`;
    if (
      !anchor ||
      anchor.digest !== from.digest ||
      keyedDigest(auditKey, anchor.canonical) !== anchor.digest
    ) {
      return { valid: false, checked, ...counts, first_invalid: anchor?.audit_id ?? `seq:${from.seq}` };
    }
  }
  const cursor = tx<
    { audit_id: string; seq: number; previous_digest: string | null; digest: string; canonical: string }[]
  >`
    select audit_id, seq, previous_digest, digest, ${canonicalText(tx)} as canonical
    from audit_log where tenant_id = ${tenantId} and seq > ${seq} order by seq`.cursor(500);
  for await (const rows of cursor) {
    for (const row of rows) {
      checked += 1;
      const linked = Number(row.seq) === seq + 1 && row.previous_digest === previous;
      if (!linked || keyedDigest(auditKey, row.canonical) !== row.digest) {
        return { valid: false, checked, ...counts, first_invalid: row.audit_id };
      }
      seq = Number(row.seq);
      previous = row.digest;
    }
  }
  if (firstRefused !== undefined) return { valid: false, checked, ...counts, first_invalid: firstRefused };
  return previous === null
    ? { valid: true, checked, ...counts }
    : { valid: true, checked, ...counts, head: { seq, digest: previous } };
}

/**
 * The tenant's pending entries, each one's mac recomputed here with the key: how many there are,
 * how many are refused (the mac does not hold) and the first refused one in pending_id order.
 */
export async function checkPendingAudit(
  tx: TransactionSql,
  tenantId: string,
  auditKey: string,
): Promise<{ pending: number; refused: number; firstRefused?: string }> {
  let pending = 0;
  let refused = 0;
  let firstRefused: string | undefined;
  const queued = tx<{ audit_id: string; mac: string; canonical: string }[]>`
    select audit_id, mac, ${pendingCanonicalText(tx)} as canonical
    from audit_pending where tenant_id = ${tenantId} order by pending_id`.cursor(500);
  for await (const rows of queued) {
    for (const row of rows) {
      pending += 1;
      if (keyedDigest(auditKey, row.canonical) !== row.mac) {
        refused += 1;
        firstRefused ??= row.audit_id;
      }
    }
  }
  return firstRefused === undefined ? { pending, refused } : { pending, refused, firstRefused };
}

export type QuarantineOutcome =
  | { outcome: 'quarantined'; entry: AuditRecord; sealedAfter: number }
  | { outcome: 'not_found' | 'not_refused' };

/**
 * An operator's way past a refused pending entry (audit_quarantine, migration 0030): under the
 * chain lock, what precedes it is sealed, an `audit.quarantined` entry (`e`, its action forced)
 * is linked in its place carrying only the refused row's pending_id, claimed audit_id, mac and
 * content digest, the row is deleted and what follows is sealed. `not_found` (no such pending
 * entry in the tenant) and `not_refused` (its mac holds: it will be sealed as it is) change
 * nothing. Runs in the caller's transaction.
 */
export async function quarantinePendingAudit(
  tx: TransactionSql,
  pendingId: number,
  e: AuditEntry,
): Promise<QuarantineOutcome> {
  const [row] = await tx<{ r: { outcome: string; audit_id?: string; sealed?: number } }[]>`
    select audit_quarantine(${pendingId}::bigint, ${jsonb(tx, auditEntryJson(e))}) as r`;
  const r = row!.r;
  if (r.outcome === 'not_found' || r.outcome === 'not_refused') return { outcome: r.outcome };
  const [entry] = await tx<AuditRecord[]>`
    select ${auditColumns(tx)} from audit_log where tenant_id = ${e.tenantId} and audit_id = ${r.audit_id!}`;
  if (!entry) throw new Error('audit_quarantine linked no entry');
  return { outcome: 'quarantined', entry, sealedAfter: r.sealed ?? 0 };
}
