import { sql } from 'drizzle-orm';
import {
  check,
  foreignKey,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import { createdAt, SHA256_HEX_PATTERN } from './columns';
import { inDomain, matchesDomain, runtimeIdDomain } from './domains';
import { messageEvent } from './message-event';
import { session } from './session';

export const MEMORY_ROLES = ['user', 'assistant'] as const;
export type MemoryRole = (typeof MEMORY_ROLES)[number];
export const MEMORY_VISIBILITIES = ['session', 'user'] as const;
export type MemoryVisibility = (typeof MEMORY_VISIBILITIES)[number];
export const MEMORY_INDEX_STATUSES = ['not_indexed', 'pending', 'indexed', 'failed'] as const;
export type MemoryIndexStatus = (typeof MEMORY_INDEX_STATUSES)[number];

/**
 * Durable conversation memory, written (linked to its source event) before the reply is
 * materialised. The body is inline (`content`) or external (`content_ref`); the digest, tenant and
 * visibility stay in SQL either way. A vector index, if any, is rebuildable and never the truth.
 */
export const memoryEntry = pgTable(
  'memory_entry',
  {
    tenantId: text('tenant_id').notNull(),
    memoryId: runtimeIdDomain('memory_entry_memory_id', 'mem')('memory_id').notNull(),
    userId: text('user_id'),
    sessionId: text('session_id').notNull(),
    sourceEventId: text('source_event_id').notNull(),
    role: inDomain('memory_entry_role', MEMORY_ROLES)('role').notNull(),
    content: text('content'),
    contentRef: text('content_ref'),
    contentDigest: matchesDomain(
      'memory_entry_content_digest',
      SHA256_HEX_PATTERN,
    )('content_digest').notNull(),
    visibility: inDomain(
      'memory_entry_visibility',
      MEMORY_VISIBILITIES,
    )('visibility')
      .notNull()
      .default('session'),
    indexStatus: inDomain(
      'memory_entry_index_status',
      MEMORY_INDEX_STATUSES,
    )('index_status')
      .notNull()
      .default('not_indexed'),
    createdAt: createdAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'memory_entry_pkey', columns: [t.tenantId, t.memoryId] }),
    check('memory_entry_body_check', sql`content IS NOT NULL OR content_ref IS NOT NULL`),
    foreignKey({
      name: 'fk_memory_entry_session',
      columns: [t.tenantId, t.sessionId],
      foreignColumns: [session.tenantId, session.sessionId],
    }),
    foreignKey({
      name: 'fk_memory_entry_source_event',
      columns: [t.tenantId, t.sourceEventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    index('memory_entry_tenant_session_created_idx').on(t.tenantId, t.sessionId, t.createdAt),
    index('memory_entry_tenant_source_event_idx').on(t.tenantId, t.sourceEventId),
  ],
);
