import {
  foreignKey,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import { createdAt, SHA256_HEX_PATTERN } from './columns';
import { matchesDomain, runtimeIdDomain } from './domains';
import { messageEvent } from './message-event';

/**
 * The full reply text of an execution, written before the event pins it (reply_cache_ref), so a
 * crash after `completed` is repaired from here and the model never runs twice.
 */
export const replyCache = pgTable(
  'reply_cache',
  {
    tenantId: text('tenant_id').notNull(),
    replyId: runtimeIdDomain('reply_cache_reply_id', 'rep')('reply_id').notNull(),
    eventId: text('event_id').notNull(),
    content: text('content').notNull(),
    contentDigest: matchesDomain(
      'reply_cache_content_digest',
      SHA256_HEX_PATTERN,
    )('content_digest').notNull(),
    createdAt: createdAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'reply_cache_pkey', columns: [t.tenantId, t.replyId] }),
    foreignKey({
      name: 'fk_reply_cache_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    index('reply_cache_tenant_event_idx').on(t.tenantId, t.eventId),
  ],
);
