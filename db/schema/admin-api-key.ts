import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  check,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { checkIn, checkMatches, checkUlidId, createdAt, SHA256_HEX_PATTERN } from './columns';
import { tenant } from './tenant';

export const ADMIN_API_KEY_ROLES = ['tenant_admin', 'tenant_viewer'] as const;
export type AdminApiKeyRole = (typeof ADMIN_API_KEY_ROLES)[number];
export const ADMIN_API_KEY_STATUSES = ['active', 'revoked'] as const;
export type AdminApiKeyStatus = (typeof ADMIN_API_KEY_STATUSES)[number];

/**
 * Tenant-scoped admin API keys. Only the SHA-256 of the key is stored (the key is shown once);
 * authentication looks the digest up through authenticate_admin_api_key() because the tenant is
 * not known yet at that point and RLS would hide the row.
 */
export const adminApiKey = pgTable(
  'admin_api_key',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    keyId: text('key_id').notNull(),
    role: text('role', { enum: ADMIN_API_KEY_ROLES }).notNull(),
    keyDigest: text('key_digest').notNull().unique('admin_api_key_key_digest_unique'),
    status: text('status', { enum: ADMIN_API_KEY_STATUSES }).notNull().default('active'),
    createdAt: createdAt(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'admin_api_key_pkey', columns: [t.tenantId, t.keyId] }),
    checkUlidId('admin_api_key_key_id_check', 'key_id', 'key'),
    checkIn('admin_api_key_role_check', 'role', ADMIN_API_KEY_ROLES),
    checkMatches('admin_api_key_key_digest_check', 'key_digest', SHA256_HEX_PATTERN),
    checkIn('admin_api_key_status_check', 'status', ADMIN_API_KEY_STATUSES),
    check('admin_api_key_revoked_at_check', sql`(status = 'revoked') = (revoked_at IS NOT NULL)`),
  ],
);
