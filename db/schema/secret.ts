import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  check,
  integer,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  unique,
} from 'drizzle-orm/pg-core';
import { checkIn, checkMatches, checkUlidId, createdAt, updatedAt } from './columns';
import { tenant } from './tenant';

export const SECRET_STATUSES = ['active', 'disabled'] as const;
export type SecretStatus = (typeof SECRET_STATUSES)[number];
/**
 * What a secret may be used for, fixed when it is created. Every reference is checked against it
 * (telegram binding → telegram_bot, wecom binding → wecom_app, model profile api_key_secret_ref →
 * model_api_key), in the admin API and by trigger (migration 0023), so a channel secret is never
 * sent to a model endpoint and a model key never verifies a webhook.
 */
export const SECRET_PURPOSES = [
  'model_api_key',
  'telegram_bot',
  'wecom_app',
  'tool_credential',
  'object_storage',
] as const;
export type SecretPurpose = (typeof SECRET_PURPOSES)[number];

/**
 * A named tenant secret. Values live only as ciphertext in secret_version; other tables reference
 * a secret by (tenant_id, secret_ref) and never hold a value.
 */
export const secret = pgTable(
  'secret',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    secretRef: text('secret_ref').notNull(),
    name: text('name').notNull(),
    // Immutable: a trigger rejects any change (migration 0023).
    purpose: text('purpose', { enum: SECRET_PURPOSES }).notNull(),
    currentVersion: integer('current_version').notNull().default(1),
    status: text('status', { enum: SECRET_STATUSES }).notNull().default('active'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'secret_pkey', columns: [t.tenantId, t.secretRef] }),
    unique('secret_tenant_name_unique').on(t.tenantId, t.name),
    checkUlidId('secret_secret_ref_check', 'secret_ref', 'sec'),
    checkMatches('secret_name_check', 'name', { regex: '^[a-z][a-z0-9_-]*$', minLength: 1, maxLength: 64 }),
    check('secret_current_version_check', sql`current_version >= 1`),
    checkIn('secret_status_check', 'status', SECRET_STATUSES),
    checkIn('secret_purpose_check', 'purpose', SECRET_PURPOSES),
  ],
);
