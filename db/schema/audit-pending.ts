import { bigserial, index, type PgTableExtraConfigValue, pgTable, unique } from 'drizzle-orm/pg-core';
import { auditEntryColumns } from './audit-log';
import { checkJsonObject, SHA256_HEX_PATTERN } from './columns';
import { matchesDomain } from './domains';

/**
 * Audit entries written by the runtime (the worker's step functions and activities) that the
 * sealer has not yet linked into the tenant's hash chain (audit_log). They are written through
 * audit_enqueue in the transaction of the change they record, without the chain's lock; audit_seal
 * moves the committed ones into audit_log and deletes them (migration 0030), so the chain is in
 * sealing order — commit order up to one sealing pass, not pending_id order (an id is drawn before
 * its transaction commits). A refused row leaves only by audit_quarantine. `mac` is an
 * HMAC under the audit key over the row's content and pending_id, computed on insert: the sealer
 * refuses a row whose mac does not hold, and verification reports it. Its columns share audit_log's domains,
 * so an entry that could not be sealed fails in its writer's transaction, not in the sealer's.
 */
export const auditPending = pgTable(
  'audit_pending',
  {
    pendingId: bigserial('pending_id', { mode: 'number' }).primaryKey(),
    ...auditEntryColumns(),
    mac: matchesDomain('audit_pending_mac', SHA256_HEX_PATTERN)('mac').notNull(),
  },
  (t): PgTableExtraConfigValue[] => [
    unique('audit_pending_tenant_audit_id_unique').on(t.tenantId, t.auditId),
    checkJsonObject('audit_pending_details_check', 'details'),
    index('audit_pending_tenant_idx').on(t.tenantId, t.pendingId),
  ],
);
