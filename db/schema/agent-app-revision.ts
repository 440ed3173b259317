import { sql } from 'drizzle-orm';
import {
  check,
  foreignKey,
  integer,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import { agentApp } from './agent-app';
import { checkJsonObject, checkMatches, checkNotBlank, createdAt, SHA256_HEX_PATTERN } from './columns';
import { modelProfile } from './model-profile';

/**
 * An immutable, content-addressed snapshot of an app's behaviour (prompt, tools, scripted rules,
 * limits). A trigger rejects UPDATE and DELETE; a new behaviour is a new revision.
 */
export const agentAppRevision = pgTable(
  'agent_app_revision',
  {
    tenantId: text('tenant_id').notNull(),
    appId: text('app_id').notNull(),
    revision: integer('revision').notNull(),
    modelProfileId: text('model_profile_id').notNull(),
    systemPrompt: text('system_prompt').notNull(),
    tools: jsonb('tools').$type<unknown[]>().notNull().default(sql`'[]'::jsonb`),
    scripted: jsonb('scripted').$type<Record<string, unknown>>(),
    limits: jsonb('limits').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    /** Double-texting policy: { policy: enqueue | collect | interrupt | reject, debounce_ms?, busy_reply? }. */
    conversation: jsonb('conversation')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{"policy": "enqueue"}'::jsonb`),
    contentDigest: text('content_digest').notNull(),
    createdBy: text('created_by').notNull(),
    createdAt: createdAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'agent_app_revision_pkey', columns: [t.tenantId, t.appId, t.revision] }),
    check('agent_app_revision_revision_check', sql`revision >= 1`),
    check('agent_app_revision_tools_check', sql`jsonb_typeof(tools) = 'array'`),
    check('agent_app_revision_scripted_check', sql`scripted IS NULL OR jsonb_typeof(scripted) = 'object'`),
    checkJsonObject('agent_app_revision_limits_check', 'limits'),
    checkJsonObject('agent_app_revision_conversation_check', 'conversation'),
    checkMatches('agent_app_revision_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
    checkNotBlank('agent_app_revision_created_by_check', 'created_by', 200),
    foreignKey({
      name: 'fk_agent_app_revision_app',
      columns: [t.tenantId, t.appId],
      foreignColumns: [agentApp.tenantId, agentApp.appId],
    }),
    foreignKey({
      name: 'fk_agent_app_revision_model_profile',
      columns: [t.tenantId, t.modelProfileId],
      foreignColumns: [modelProfile.tenantId, modelProfile.modelProfileId],
    }),
  ],
);
