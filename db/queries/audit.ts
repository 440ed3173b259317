import type { TransactionSql } from 'postgres';
import { canonicalJson, sha256Hex } from '../../lib/digest';
import { newId } from '../ids';

// The per-tenant audit hash chain. Both the admin API (tenant_admin_writer) and the worker
// (tenant_app_writer) append through appendAudit; both roles have INSERT/SELECT on audit_log and
// nothing else is needed: serialisation is a transaction-scoped advisory lock (no table
// privilege), and the caller's transaction must already carry `app.tenant_id` = entry.tenantId
// (RLS rejects anything else).

/** What a caller records; everything optional is stored as NULL when absent. */
export interface AuditEntry {
  tenantId: string;
  action: string;
  actorType: string;
  actorId: string;
  reason?: string | null;
  bindingId?: string | null;
  channel?: 'telegram' | 'wecom' | null;
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

/**
 * occurred_at is hashed in this exact textual form (UTC, microseconds), produced by PostgreSQL
 * both when appending and when verifying, so recomputation never depends on JS Date precision.
 */
const TS_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/**
 * The digest of a row: sha256 over the canonical JSON of every stored column except `digest`
 * itself (previous_digest and seq included, so order and links are covered). Numbers are
 * normalised so a client that returns bigint as text computes the same value.
 */
export function auditDigest(r: Omit<AuditRecord, 'digest'>): string {
  return sha256Hex(
    canonicalJson({
      chain: 'switchyard.audit.v1',
      tenant_id: r.tenant_id,
      audit_id: r.audit_id,
      seq: num(r.seq),
      action: r.action,
      actor_type: r.actor_type,
      actor_id: r.actor_id,
      reason: str(r.reason),
      binding_id: str(r.binding_id),
      channel: str(r.channel),
      user_id: str(r.user_id),
      session_id: str(r.session_id),
      agent_app_id: str(r.agent_app_id),
      revision: num(r.revision),
      model_profile_id: str(r.model_profile_id),
      tool_name: str(r.tool_name),
      decision: str(r.decision),
      event_seq: num(r.event_seq),
      latency_ms: num(r.latency_ms),
      error_type: str(r.error_type),
      cost_minor: num(r.cost_minor),
      request_id: str(r.request_id),
      trace_id: str(r.trace_id),
      before_version: num(r.before_version),
      after_version: num(r.after_version),
      details: r.details ?? {},
      occurred_at: r.occurred_at,
      previous_digest: str(r.previous_digest),
    }),
  );
}

/** Appends one entry to the tenant's chain inside the caller's transaction; returns the stored row. */
export async function appendAudit(tx: TransactionSql, e: AuditEntry): Promise<AuditRecord> {
  // One writer per tenant chain at a time; released at commit/rollback, so a rolled-back
  // mutation also rolls back its audit entry and never leaves a hole in the sequence.
  await tx`select pg_advisory_xact_lock(hashtextextended(${`audit_log:${e.tenantId}`}, 0))`;
  const [head] = await tx<{ ts: string; seq: number | null; digest: string | null }[]>`
    select to_char(clock_timestamp() at time zone 'UTC', ${TS_FORMAT}) as ts, l.seq, l.digest
    from (select 1) as one
    left join lateral (
      select seq, digest from audit_log where tenant_id = ${e.tenantId} order by seq desc limit 1
    ) as l on true`;
  if (!head) throw new Error('audit head query returned nothing');

  const record: Omit<AuditRecord, 'digest'> = {
    tenant_id: e.tenantId,
    audit_id: newId('aud'),
    seq: head.seq === null ? 1 : Number(head.seq) + 1,
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
    // Round-trip through JSON so what is hashed is exactly what jsonb will give back.
    details: JSON.parse(JSON.stringify(e.details ?? {})) as Record<string, unknown>,
    occurred_at: head.ts,
    previous_digest: head.digest,
  };
  const digest = auditDigest(record);
  // occurred_at is bound as text (cast in SQL): bound as timestamptz the driver would pass it
  // through a JS Date, drop the microseconds, and store a value other than the one hashed.
  await tx`
    insert into audit_log (
      tenant_id, audit_id, seq, action, actor_type, actor_id, reason, binding_id, channel, user_id,
      session_id, agent_app_id, revision, model_profile_id, tool_name, decision, event_seq, latency_ms,
      error_type, cost_minor, request_id, trace_id, before_version, after_version, details, occurred_at,
      previous_digest, digest
    ) values (
      ${record.tenant_id}, ${record.audit_id}, ${record.seq}, ${record.action}, ${record.actor_type},
      ${record.actor_id}, ${record.reason}, ${record.binding_id}, ${record.channel}, ${record.user_id},
      ${record.session_id}, ${record.agent_app_id}, ${record.revision}, ${record.model_profile_id},
      ${record.tool_name}, ${record.decision}, ${record.event_seq}, ${record.latency_ms}, ${record.error_type},
      ${record.cost_minor}, ${record.request_id}, ${record.trace_id}, ${record.before_version},
      ${record.after_version}, ${tx.json(record.details as never)}, ${record.occurred_at}::text::timestamptz,
      ${record.previous_digest}, ${digest}
    )`;
  return { ...record, digest };
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
  valid: boolean;
  checked: number;
  first_invalid?: string;
}

/**
 * Walks the tenant's chain in seq order and recomputes every digest and link. A modified row
 * fails its own digest; a deleted row breaks the seq continuity and the next row's link; a
 * reordered or re-linked row fails both. Reports the first broken row and stops there.
 */
export async function verifyAuditChain(tx: TransactionSql, tenantId: string): Promise<AuditVerification> {
  let checked = 0;
  let previous: string | null = null;
  const cursor = tx<AuditRecord[]>`
    select ${auditColumns(tx)} from audit_log where tenant_id = ${tenantId} order by seq`.cursor(500);
  for await (const rows of cursor) {
    for (const row of rows) {
      checked += 1;
      const linked = Number(row.seq) === checked && row.previous_digest === previous;
      if (!linked || auditDigest(row) !== row.digest) {
        return { valid: false, checked, first_invalid: row.audit_id };
      }
      previous = row.digest;
    }
  }
  return { valid: true, checked };
}
