import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  check,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  unique,
} from 'drizzle-orm/pg-core';
import {
  checkIn,
  checkJsonObject,
  checkMatches,
  checkUlidId,
  checkVersion,
  createdAt,
  SHA256_HEX_PATTERN,
  SLUG_PATTERN,
  updatedAt,
  version,
} from './columns';
import { tenant } from './tenant';

export const BACKEND_PROFILE_STATUSES = ['active', 'suspended', 'disabled'] as const;
export type BackendProfileStatus = (typeof BACKEND_PROFILE_STATUSES)[number];
export const BACKEND_PROVIDERS = ['postgres'] as const;
export type BackendProvider = (typeof BACKEND_PROVIDERS)[number];

/** Where a tenant's session/event/memory data lives (seed shape; only `postgres` today). */
export const backendProfile = pgTable(
  'backend_profile',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    profileId: text('profile_id').notNull(),
    profileKey: text('profile_key').notNull(),
    status: text('status', { enum: BACKEND_PROFILE_STATUSES }).notNull().default('active'),
    provider: text('provider', { enum: BACKEND_PROVIDERS }).notNull().default('postgres'),
    config: jsonb('config').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    /** Object storage of the tenant's artifacts (api/admin/artifact-config.ts); no secret, only a reference. */
    artifacts: jsonb('artifacts')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{"provider": "filesystem"}'::jsonb`),
    version: version(),
    contentDigest: text('content_digest').notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'backend_profile_pkey', columns: [t.tenantId, t.profileId] }),
    unique('backend_profile_tenant_profile_key_unique').on(t.tenantId, t.profileKey),
    checkUlidId('backend_profile_profile_id_check', 'profile_id', 'bp'),
    checkMatches('backend_profile_profile_key_check', 'profile_key', SLUG_PATTERN),
    checkIn('backend_profile_status_check', 'status', BACKEND_PROFILE_STATUSES),
    checkIn('backend_profile_provider_check', 'provider', BACKEND_PROVIDERS),
    checkJsonObject('backend_profile_config_check', 'config'),
    check('backend_profile_artifacts_check', sql`artifacts ->> 'provider' IN ('filesystem', 's3')`),
    checkVersion('backend_profile_version_check'),
    checkMatches('backend_profile_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
  ],
);
