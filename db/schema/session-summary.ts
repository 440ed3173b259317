import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
} from 'drizzle-orm/pg-core';
import { checkIn, checkMatches, createdAt, SHA256_HEX_PATTERN, updatedAt } from './columns';
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
    summaryVersion: bigint('summary_version', { mode: 'number' }).notNull().default(1),
    baseEventSeq: bigint('base_event_seq', { mode: 'number' }).notNull(),
    content: text('content'),
    contentRef: text('content_ref'),
    contentDigest: text('content_digest').notNull(),
    status: text('status', { enum: SESSION_SUMMARY_STATUSES }).notNull().default('ready'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'session_summary_pkey', columns: [t.tenantId, t.sessionId] }),
    check('session_summary_version_check', sql`summary_version >= 1`),
    check('session_summary_base_event_seq_check', sql`base_event_seq >= 0`),
    check('session_summary_body_check', sql`content IS NOT NULL OR content_ref IS NOT NULL`),
    checkMatches('session_summary_content_digest_check', 'content_digest', SHA256_HEX_PATTERN),
    checkIn('session_summary_status_check', 'status', SESSION_SUMMARY_STATUSES),
    foreignKey({
      name: 'fk_session_summary_session',
      columns: [t.tenantId, t.sessionId],
      foreignColumns: [session.tenantId, session.sessionId],
    }),
  ],
);
