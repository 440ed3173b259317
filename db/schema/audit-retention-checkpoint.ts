import { sql } from 'drizzle-orm';
import { bigint, check, type PgTableExtraConfigValue, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { checkMatches, SHA256_HEX_PATTERN } from './columns';
import { tenant } from './tenant';

/**
 * Where a tenant's audit chain starts after retention removed its oldest rows: the last removed
 * row's seq and digest, signed with the audit key (lib/audit-key.ts signCheckpoint) by the
 * housekeeping run that removed them. Verification starts after it, so the chain stays verifiable;
 * one row per tenant, moved forward by each retention run (migration 0024's audit_retention_prune).
 */
export const auditRetentionCheckpoint = pgTable(
  'audit_retention_checkpoint',
  {
    tenantId: text('tenant_id')
      .primaryKey()
      .references(() => tenant.tenantId),
    seq: bigint('seq', { mode: 'number' }).notNull(),
    digest: text('digest').notNull(),
    signature: text('signature').notNull(),
    /** rows removed by every retention run so far */
    removedTotal: bigint('removed_total', { mode: 'number' }).notNull(),
    prunedAt: timestamp('pruned_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (): PgTableExtraConfigValue[] => [
    check('audit_retention_checkpoint_seq_check', sql`seq >= 1`),
    check('audit_retention_checkpoint_removed_check', sql`removed_total >= 1`),
    checkMatches('audit_retention_checkpoint_digest_check', 'digest', SHA256_HEX_PATTERN),
    checkMatches('audit_retention_checkpoint_signature_check', 'signature', SHA256_HEX_PATTERN),
  ],
);
