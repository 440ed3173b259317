import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  check,
  foreignKey,
  integer,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  unique,
} from 'drizzle-orm/pg-core';
import { agentAppRevision } from './agent-app-revision';
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
import { tenant } from './tenant';

export const AGENT_APP_STATUSES = ['active', 'disabled'] as const;
export type AgentAppStatus = (typeof AGENT_APP_STATUSES)[number];

/**
 * Stable identity of an agent application. Its behaviour lives in immutable revisions;
 * `published_revision` points at the one new executions use (NULL = nothing published, and the
 * gateway must not fall back to anything else).
 */
export const agentApp = pgTable(
  'agent_app',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    appId: text('app_id').notNull(),
    appKey: text('app_key').notNull(),
    displayName: text('display_name').notNull(),
    status: text('status', { enum: AGENT_APP_STATUSES }).notNull().default('active'),
    publishedRevision: integer('published_revision'),
    version: version(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'agent_app_pkey', columns: [t.tenantId, t.appId] }),
    unique('agent_app_tenant_app_key_unique').on(t.tenantId, t.appKey),
    checkUlidId('agent_app_app_id_check', 'app_id', 'app'),
    checkMatches('agent_app_app_key_check', 'app_key', SLUG_PATTERN),
    check('agent_app_display_name_check', sql`length(btrim(display_name)) BETWEEN 1 AND 200`),
    checkIn('agent_app_status_check', 'status', AGENT_APP_STATUSES),
    check('agent_app_published_revision_check', sql`published_revision IS NULL OR published_revision >= 1`),
    checkVersion('agent_app_version_check'),
    // The published pointer can only name a revision of this very app (NULL allowed: MATCH SIMPLE).
    foreignKey({
      name: 'fk_agent_app_published_revision',
      columns: [t.tenantId, t.appId, t.publishedRevision],
      foreignColumns: [agentAppRevision.tenantId, agentAppRevision.appId, agentAppRevision.revision],
    }),
  ],
);
