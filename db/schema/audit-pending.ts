import { sql } from 'drizzle-orm';
import {
  bigserial,
  check,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  text,
  unique,
} from 'drizzle-orm/pg-core';
import { auditEntryColumns } from './audit-log';
import { checkJsonObject, checkMatches, checkNotBlank, checkRuntimeId, SHA256_HEX_PATTERN } from './columns';

/**
 * Audit entries written by the runtime (the worker's step functions and activities) that the
 * sealer has not yet linked into the tenant's hash chain (audit_log). They are written through
 * audit_enqueue in the transaction of the change they record, without the chain's lock; audit_seal
 * moves the committed ones into audit_log and deletes them (migration 0030), so the chain is in
 * sealing order — commit order up to one sealing pass, not pending_id order (an id is drawn before
 * its transaction commits). A refused row leaves only by audit_quarantine. `mac` is an
 * HMAC under the audit key over the row's content and pending_id, computed on insert: the sealer
 * refuses a row whose mac does not hold, and verification reports it. The CHECKs are audit_log's,
 * so an entry that could not be sealed fails in its writer's transaction, not in the sealer's.
 */
export const auditPending = pgTable(
  'audit_pending',
  {
    pendingId: bigserial('pending_id', { mode: 'number' }).primaryKey(),
    ...auditEntryColumns(),
    mac: text('mac').notNull(),
  },
  (t): PgTableExtraConfigValue[] => [
    unique('audit_pending_tenant_audit_id_unique').on(t.tenantId, t.auditId),
    checkRuntimeId('audit_pending_audit_id_check', 'audit_id', 'aud'),
    checkNotBlank('audit_pending_action_check', 'action', 200),
    checkNotBlank('audit_pending_actor_type_check', 'actor_type', 100),
    checkNotBlank('audit_pending_actor_id_check', 'actor_id', 200),
    check('audit_pending_channel_check', sql`channel IS NULL OR channel IN ('telegram', 'wecom', 'console')`),
    check('audit_pending_latency_ms_check', sql`latency_ms IS NULL OR latency_ms >= 0`),
    check('audit_pending_cost_minor_check', sql`cost_minor IS NULL OR cost_minor >= 0`),
    checkJsonObject('audit_pending_details_check', 'details'),
    checkMatches('audit_pending_mac_check', 'mac', SHA256_HEX_PATTERN),
    index('audit_pending_tenant_idx').on(t.tenantId, t.pendingId),
  ],
);
