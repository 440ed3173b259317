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
import { CHANNELS } from './channel-binding';
import { checkJsonObject, SHA256_HEX_PATTERN } from './columns';
import { atLeastDomain, inDomain, matchesDomain, notBlankDomain, runtimeIdDomain } from './domains';
import { tenant } from './tenant';

// The rules of the columns both tables share, one domain each (db/schema/domains.ts): an entry
// that could not be sealed fails in its writer's transaction, not in the sealer's.
const auditId = runtimeIdDomain('audit_entry_audit_id', 'aud');
const action = notBlankDomain('audit_entry_action', 200);
const actorType = notBlankDomain('audit_entry_actor_type', 100);
const actorId = notBlankDomain('audit_entry_actor_id', 200);
const channel = inDomain('audit_entry_channel', CHANNELS);
const latencyMs = atLeastDomain('audit_entry_latency_ms', 'bigint', 0);
const costMinor = atLeastDomain('audit_entry_cost_minor', 'bigint', 0);

/**
 * What one audit entry records, sealed (audit_log) or not yet (audit_pending,
 * db/schema/audit-pending.ts): the columns both tables share.
 */
export const auditEntryColumns = () => ({
  tenantId: text('tenant_id')
    .notNull()
    .references((): AnyPgColumn => tenant.tenantId),
  auditId: auditId('audit_id').notNull(),
  action: action('action').notNull(),
  actorType: actorType('actor_type').notNull(),
  actorId: actorId('actor_id').notNull(),
  reason: text('reason'),
  bindingId: text('binding_id'),
  channel: channel('channel'),
  userId: text('user_id'),
  sessionId: text('session_id'),
  agentAppId: text('agent_app_id'),
  revision: integer('revision'),
  modelProfileId: text('model_profile_id'),
  toolName: text('tool_name'),
  decision: text('decision'),
  eventSeq: bigint('event_seq', { mode: 'number' }),
  latencyMs: latencyMs('latency_ms'),
  errorType: text('error_type'),
  costMinor: costMinor('cost_minor'),
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
    seq: atLeastDomain('audit_log_seq', 'bigint', 1)('seq').notNull(),
    previousDigest: matchesDomain('audit_log_previous_digest', SHA256_HEX_PATTERN)('previous_digest'),
    digest: matchesDomain('audit_log_digest', SHA256_HEX_PATTERN)('digest').notNull(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'audit_log_pkey', columns: [t.tenantId, t.auditId] }),
    unique('audit_log_tenant_seq_unique').on(t.tenantId, t.seq),
    checkJsonObject('audit_log_details_check', 'details'),
    // The chain has exactly one start.
    check('audit_log_chain_start_check', sql`(seq = 1) = (previous_digest IS NULL)`),
    index('audit_log_tenant_occurred_idx').on(t.tenantId, t.occurredAt.desc()),
  ],
);
