import { sql } from 'drizzle-orm';
import {
  bigint,
  char,
  check,
  foreignKey,
  integer,
  type PgTableExtraConfigValue,
  pgTable,
  real,
  text,
} from 'drizzle-orm/pg-core';
import { agentApp } from './agent-app';
import { backendProfile } from './backend-profile';
import {
  checkIn,
  checkMatches,
  checkUlidId,
  checkVersion,
  createdAt,
  SLUG_PATTERN,
  updatedAt,
  version,
} from './columns';

export const TENANT_STATUSES = ['active', 'suspended', 'disabled'] as const;
export type TenantStatus = (typeof TENANT_STATUSES)[number];
export const LOG_MASKING_LEVELS = ['none', 'basic', 'strict'] as const;
export type LogMaskingLevel = (typeof LOG_MASKING_LEVELS)[number];

/**
 * The narrow tenant root (seed DDL, normative). Identity (tenant_id, tenant_key) is immutable by
 * trigger; status and configuration change only through the SECURITY DEFINER functions
 * transition_tenant_status / update_tenant_configuration (see the hand-written migrations).
 * NULL limits mean "no limit"; 0 is a valid zero quota.
 */
export const tenant = pgTable(
  'tenant',
  {
    tenantId: text('tenant_id').primaryKey(),
    tenantKey: text('tenant_key').notNull().unique(),
    displayName: text('display_name').notNull(),
    status: text('status', { enum: TENANT_STATUSES }).notNull().default('active'),
    rateLimitRpm: bigint('rate_limit_rpm', { mode: 'number' }),
    maxConcurrentExecutions: bigint('max_concurrent_executions', { mode: 'number' }),
    monthlyTokenBudget: bigint('monthly_token_budget', { mode: 'number' }),
    monthlySpendLimitMinor: bigint('monthly_spend_limit_minor', { mode: 'number' }),
    billingCurrency: char('billing_currency', { length: 3 }),
    auditRetentionDays: integer('audit_retention_days').notNull().default(90),
    /** Artifacts (media in, reply attachments) older than this are removed by housekeeping. */
    artifactRetentionDays: integer('artifact_retention_days').notNull().default(30),
    logMaskingLevel: text('log_masking_level', { enum: LOG_MASKING_LEVELS }).notNull().default('basic'),
    traceSamplingRate: real('trace_sampling_rate').notNull().default(1.0),
    defaultAgentAppId: text('default_agent_app_id'),
    defaultBackendProfileId: text('default_backend_profile_id'),
    version: version(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    checkUlidId('tenant_tenant_id_check', 'tenant_id', 't'),
    checkMatches('tenant_tenant_key_check', 'tenant_key', SLUG_PATTERN),
    check('tenant_display_name_check', sql`length(btrim(display_name)) BETWEEN 1 AND 200`),
    checkIn('tenant_status_check', 'status', TENANT_STATUSES),
    check('tenant_rate_limit_rpm_check', sql`rate_limit_rpm IS NULL OR rate_limit_rpm >= 0`),
    check(
      'tenant_max_concurrent_executions_check',
      sql`max_concurrent_executions IS NULL OR max_concurrent_executions > 0`,
    ),
    check(
      'tenant_monthly_token_budget_check',
      sql`monthly_token_budget IS NULL OR monthly_token_budget >= 0`,
    ),
    check(
      'tenant_monthly_spend_limit_minor_check',
      sql`monthly_spend_limit_minor IS NULL OR monthly_spend_limit_minor >= 0`,
    ),
    check(
      'tenant_spend_limit_currency_check',
      sql`monthly_spend_limit_minor IS NULL OR billing_currency IS NOT NULL`,
    ),
    check('tenant_billing_currency_check', sql`billing_currency IS NULL OR billing_currency ~ '^[A-Z]{3}$'`),
    check('tenant_audit_retention_days_check', sql`audit_retention_days > 0`),
    check('tenant_artifact_retention_days_check', sql`artifact_retention_days > 0`),
    checkIn('tenant_log_masking_level_check', 'log_masking_level', LOG_MASKING_LEVELS),
    check('tenant_trace_sampling_rate_check', sql`trace_sampling_rate BETWEEN 0 AND 1`),
    checkVersion('tenant_version_check'),
    // Default references must stay inside the tenant (seed: 默认引用的跨租户完整性). Both may be NULL.
    foreignKey({
      name: 'fk_tenant_default_agent',
      columns: [t.tenantId, t.defaultAgentAppId],
      foreignColumns: [agentApp.tenantId, agentApp.appId],
    }),
    foreignKey({
      name: 'fk_tenant_default_backend',
      columns: [t.tenantId, t.defaultBackendProfileId],
      foreignColumns: [backendProfile.tenantId, backendProfile.profileId],
    }),
  ],
);
