import {
  type AnyPgColumn,
  bigint,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { checkNonNegative } from './columns';
import { tenant } from './tenant';

/**
 * Per-tenant request counts per minute, shared by every API instance: an
 * `INSERT … ON CONFLICT (tenant_id, window_start) DO UPDATE SET count = count + 1 RETURNING count`
 * is the cross-instance rate_limit_rpm check.
 */
export const rateLimitWindow = pgTable(
  'rate_limit_window',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    windowStart: timestamp('window_start', { withTimezone: true }).notNull(),
    count: bigint('count', { mode: 'number' }).notNull().default(0),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'rate_limit_window_pkey', columns: [t.tenantId, t.windowStart] }),
    checkNonNegative('rate_limit_window_count_check', 'count'),
  ],
);
