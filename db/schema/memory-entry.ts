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
import { checkIn, checkMatches, checkRuntimeId, createdAt, SHA256_HEX_PATTERN } from './columns';
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
    memoryId: text('memory_id').notNull(),
    userId: text('user_id'),
    sessionId: text('session_id').notNull(),
    sourceEventId: text('source_event_id').notNull(),
    role: text('role', { enum: MEMORY_ROLES }).notNull(),
    content: text('content'),
    contentRef: text('content_ref'),
    contentDigest: text('content_digest').notNull(),
    visibility: text('visibility', { enum: MEMORY_VISIBILITIES }).notNull().default('session'),
    indexStatus: text('index_status', { enum: MEMORY_INDEX_STATUSES }).notNull().default('not_indexed'),
    createdAt: createdAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'memory_entry_pkey', columns: [t.tenantId, t.memoryId] }),
    checkRuntimeId('memory_entry_memory_id_check', 'memory_id', 'mem'),
    checkIn('memory_entry_role_check', 'role', MEMORY_ROLES),
    check('memory_entry_body_check', sql`content IS NOT NULL OR content_ref IS NOT NULL`),
    checkMatches('memory_entry_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
    checkIn('memory_entry_visibility_check', 'visibility', MEMORY_VISIBILITIES),
    checkIn('memory_entry_index_status_check', 'index_status', MEMORY_INDEX_STATUSES),
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
