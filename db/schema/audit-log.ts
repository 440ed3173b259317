import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  check,
  index,
  integer,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
} from 'drizzle-orm/pg-core';
import { checkJsonObject, checkMatches, checkNotBlank, checkRuntimeId, SHA256_HEX_PATTERN } from './columns';
import { tenant } from './tenant';

/**
 * What one audit entry records, sealed (audit_log) or not yet (audit_pending,
 * db/schema/audit-pending.ts): the columns both tables share.
 */
export const auditEntryColumns = () => ({
  tenantId: text('tenant_id')
    .notNull()
    .references((): AnyPgColumn => tenant.tenantId),
  auditId: text('audit_id').notNull(),
  action: text('action').notNull(),
  actorType: text('actor_type').notNull(),
  actorId: text('actor_id').notNull(),
  reason: text('reason'),
  bindingId: text('binding_id'),
  channel: text('channel'),
  userId: text('user_id'),
  sessionId: text('session_id'),
  agentAppId: text('agent_app_id'),
  revision: integer('revision'),
  modelProfileId: text('model_profile_id'),
  toolName: text('tool_name'),
  decision: text('decision'),
  eventSeq: bigint('event_seq', { mode: 'number' }),
  latencyMs: bigint('latency_ms', { mode: 'number' }),
  errorType: text('error_type'),
  costMinor: bigint('cost_minor', { mode: 'number' }),
  requestId: text('request_id'),
  traceId: text('trace_id'),
  beforeVersion: bigint('before_version', { mode: 'number' }),
  afterVersion: bigint('after_version', { mode: 'number' }),
  details: jsonb('details').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
  occurredAt: timestamp('occurred_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * Append-only, per-tenant hash chain: row `seq` carries the digest of row `seq - 1` in
 * previous_digest (NULL only for seq 1) and its own digest, both computed by the database
 * (audit_append; audit_seal for the runtime's entries, which wait in audit_pending until sealed).
 * A trigger rejects UPDATE/DELETE/TRUNCATE and roles get INSERT/SELECT only.
 * The object columns (binding_id, session_id, …) are historical facts, deliberately without
 * foreign keys: an audit row must be writable for a rejected or failed action too, and must
 * never block or be blocked by the lifecycle of the object it describes.
 */
export const auditLog = pgTable(
  'audit_log',
  {
    ...auditEntryColumns(),
    seq: bigint('seq', { mode: 'number' }).notNull(),
    previousDigest: text('previous_digest'),
    digest: text('digest').notNull(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'audit_log_pkey', columns: [t.tenantId, t.auditId] }),
    unique('audit_log_tenant_seq_unique').on(t.tenantId, t.seq),
    checkRuntimeId('audit_log_audit_id_check', 'audit_id', 'aud'),
    check('audit_log_seq_check', sql`seq >= 1`),
    checkNotBlank('audit_log_action_check', 'action', 200),
    checkNotBlank('audit_log_actor_type_check', 'actor_type', 100),
    checkNotBlank('audit_log_actor_id_check', 'actor_id', 200),
    check('audit_log_channel_check', sql`channel IS NULL OR channel IN ('telegram', 'wecom', 'console')`),
    check('audit_log_latency_ms_check', sql`latency_ms IS NULL OR latency_ms >= 0`),
    check('audit_log_cost_minor_check', sql`cost_minor IS NULL OR cost_minor >= 0`),
    checkJsonObject('audit_log_details_check', 'details'),
    checkMatches('audit_log_previous_digest_check', 'previous_digest', SHA256_HEX_PATTERN),
    checkMatches('audit_log_digest_check', 'digest', SHA256_HEX_PATTERN),
    // The chain has exactly one start.
    check('audit_log_chain_start_check', sql`(seq = 1) = (previous_digest IS NULL)`),
    index('audit_log_tenant_occurred_idx').on(t.tenantId, t.occurredAt.desc()),
  ],
);
