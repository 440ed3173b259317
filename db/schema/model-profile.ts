import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  boolean,
  check,
  foreignKey,
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
  checkNotBlank,
  checkUlidId,
  checkVersion,
  createdAt,
  SHA256_HEX_PATTERN,
  SLUG_PATTERN,
  updatedAt,
  version,
} from './columns';
import { secret } from './secret';
import { tenant } from './tenant';

export const MODEL_PROVIDERS = ['scripted', 'openai_compatible'] as const;
export type ModelProvider = (typeof MODEL_PROVIDERS)[number];
export const MODEL_PROFILE_STATUSES = ['active', 'disabled'] as const;
export type ModelProfileStatus = (typeof MODEL_PROFILE_STATUSES)[number];

/**
 * A model endpoint and its pricing. The API key is only a reference to a tenant secret; prices are
 * minor currency units per million tokens (NULL = unpriced).
 */
export const modelProfile = pgTable(
  'model_profile',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    modelProfileId: text('model_profile_id').notNull(),
    profileKey: text('profile_key').notNull(),
    provider: text('provider', { enum: MODEL_PROVIDERS }).notNull(),
    model: text('model').notNull(),
    baseUrl: text('base_url'),
    apiKeySecretRef: text('api_key_secret_ref'),
    parameters: jsonb('parameters').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    inputPerMtokMinor: bigint('input_per_mtok_minor', { mode: 'number' }),
    outputPerMtokMinor: bigint('output_per_mtok_minor', { mode: 'number' }),
    /** The model takes images: inbound pictures are given to it as image parts. */
    vision: boolean('vision').notNull().default(false),
    /** The model is called with streaming (chat.completion.chunk events): live drafts need it. */
    stream: boolean('stream').notNull().default(false),
    status: text('status', { enum: MODEL_PROFILE_STATUSES }).notNull().default('active'),
    version: version(),
    contentDigest: text('content_digest').notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'model_profile_pkey', columns: [t.tenantId, t.modelProfileId] }),
    unique('model_profile_tenant_profile_key_unique').on(t.tenantId, t.profileKey),
    checkUlidId('model_profile_id_check', 'model_profile_id', 'mp'),
    checkMatches('model_profile_profile_key_check', 'profile_key', SLUG_PATTERN),
    checkIn('model_profile_provider_check', 'provider', MODEL_PROVIDERS),
    checkNotBlank('model_profile_model_check', 'model', 200),
    check('model_profile_base_url_check', sql`base_url IS NULL OR base_url ~ '^https?://'`),
    checkJsonObject('model_profile_parameters_check', 'parameters'),
    check('model_profile_input_price_check', sql`input_per_mtok_minor IS NULL OR input_per_mtok_minor >= 0`),
    check(
      'model_profile_output_price_check',
      sql`output_per_mtok_minor IS NULL OR output_per_mtok_minor >= 0`,
    ),
    checkIn('model_profile_status_check', 'status', MODEL_PROFILE_STATUSES),
    checkVersion('model_profile_version_check'),
    checkMatches('model_profile_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
    foreignKey({
      name: 'fk_model_profile_api_key_secret',
      columns: [t.tenantId, t.apiKeySecretRef],
      foreignColumns: [secret.tenantId, secret.secretRef],
    }),
  ],
);
