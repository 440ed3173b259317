import { sql } from 'drizzle-orm';
import {
  check,
  foreignKey,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import { createdAt, SHA256_HEX_PATTERN, updatedAt } from './columns';
import { atLeastDomain, inDomain, matchesDomain } from './domains';
import { session } from './session';

export const SESSION_SUMMARY_STATUSES = ['pending', 'ready', 'failed'] as const;
export type SessionSummaryStatus = (typeof SESSION_SUMMARY_STATUSES)[number];

/**
 * The current summary of a session, rebuilt asynchronously. Writers CAS on base_event_seq (only move
 * forward) and bump summary_version, so a summary reflects only durable memory.
 */
export const sessionSummary = pgTable(
  'session_summary',
  {
    tenantId: text('tenant_id').notNull(),
    sessionId: text('session_id').notNull(),
    summaryVersion: atLeastDomain(
      'session_summary_version',
      'bigint',
      1,
    )('summary_version')
      .notNull()
      .default(1),
    baseEventSeq: atLeastDomain('session_summary_base_event_seq', 'bigint', 0)('base_event_seq').notNull(),
    content: text('content'),
    contentRef: text('content_ref'),
    contentDigest: matchesDomain(
      'session_summary_content_digest',
      SHA256_HEX_PATTERN,
    )('content_digest').notNull(),
    status: inDomain('session_summary_status', SESSION_SUMMARY_STATUSES)('status').notNull().default('ready'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'session_summary_pkey', columns: [t.tenantId, t.sessionId] }),
    check('session_summary_body_check', sql`content IS NOT NULL OR content_ref IS NOT NULL`),
    foreignKey({
      name: 'fk_session_summary_session',
      columns: [t.tenantId, t.sessionId],
      foreignColumns: [session.tenantId, session.sessionId],
    }),
  ],
);
