import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  foreignKey,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import {
  checkIn,
  checkJsonObject,
  checkMatches,
  checkNotBlank,
  checkVersion,
  createdAt,
  SHA256_HEX_PATTERN,
} from './columns';
import { MODEL_PROVIDERS, modelProfile } from './model-profile';

/**
 * Every content version a model profile ever had, appended when the profile is created and on
 * each content change (same transaction). Executions pin (model_profile_id, version, digest) in
 * their ExecutionPlan and read the pinned content from here, so a profile edited while an
 * execution runs affects only executions that start afterwards. Append-only: a trigger rejects
 * UPDATE, DELETE and TRUNCATE; no role is granted either.
 */
export const modelProfileVersion = pgTable(
  'model_profile_version',
  {
    tenantId: text('tenant_id').notNull(),
    modelProfileId: text('model_profile_id').notNull(),
    version: bigint('version', { mode: 'number' }).notNull(),
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
    contentDigest: text('content_digest').notNull(),
    createdAt: createdAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({
      name: 'model_profile_version_pkey',
      columns: [t.tenantId, t.modelProfileId, t.version],
    }),
    checkVersion('model_profile_version_version_check'),
    checkIn('model_profile_version_provider_check', 'provider', MODEL_PROVIDERS),
    checkNotBlank('model_profile_version_model_check', 'model', 200),
    check('model_profile_version_base_url_check', sql`base_url IS NULL OR base_url ~ '^https?://'`),
    checkJsonObject('model_profile_version_parameters_check', 'parameters'),
    check(
      'model_profile_version_input_price_check',
      sql`input_per_mtok_minor IS NULL OR input_per_mtok_minor >= 0`,
    ),
    check(
      'model_profile_version_output_price_check',
      sql`output_per_mtok_minor IS NULL OR output_per_mtok_minor >= 0`,
    ),
    checkMatches('model_profile_version_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
    foreignKey({
      name: 'fk_model_profile_version_profile',
      columns: [t.tenantId, t.modelProfileId],
      foreignColumns: [modelProfile.tenantId, modelProfile.modelProfileId],
    }),
  ],
);
