import { sql } from 'drizzle-orm';
import {
  check,
  foreignKey,
  index,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { CLASS_PATTERN, checkIn, checkJsonObject, checkMatches, checkRuntimeId, createdAt } from './columns';
import { messageEvent } from './message-event';
import { replyOutbox } from './reply-outbox';
import { toolInvocation } from './tool-invocation';

export const DEAD_LETTER_KINDS = ['execution', 'segment', 'tool'] as const;
export type DeadLetterKind = (typeof DEAD_LETTER_KINDS)[number];
export const DEAD_LETTER_STATUSES = ['open', 'retried', 'discarded'] as const;
export type DeadLetterStatus = (typeof DEAD_LETTER_STATUSES)[number];

/** Work that needs an operator: an execution, a reply segment or a tool call that could not be settled. */
export const deadLetter = pgTable(
  'dead_letter',
  {
    tenantId: text('tenant_id').notNull(),
    deadLetterId: text('dead_letter_id').notNull(),
    eventId: text('event_id').notNull(),
    kind: text('kind', { enum: DEAD_LETTER_KINDS }).notNull(),
    segmentId: text('segment_id'),
    invocationId: text('invocation_id'),
    reasonClass: text('reason_class').notNull(),
    detail: jsonb('detail').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    status: text('status', { enum: DEAD_LETTER_STATUSES }).notNull().default('open'),
    createdAt: createdAt(),
    resolvedAt: timestamp('resolved_at', { withTimezone: true }),
    resolvedBy: text('resolved_by'),
    resolutionReason: text('resolution_reason'),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'dead_letter_pkey', columns: [t.tenantId, t.deadLetterId] }),
    checkRuntimeId('dead_letter_id_check', 'dead_letter_id', 'dl'),
    checkIn('dead_letter_kind_check', 'kind', DEAD_LETTER_KINDS),
    checkMatches('dead_letter_reason_class_check', 'reason_class', CLASS_PATTERN),
    checkJsonObject('dead_letter_detail_check', 'detail'),
    checkIn('dead_letter_status_check', 'status', DEAD_LETTER_STATUSES),
    check('dead_letter_segment_check', sql`kind <> 'segment' OR segment_id IS NOT NULL`),
    check('dead_letter_tool_check', sql`kind <> 'tool' OR invocation_id IS NOT NULL`),
    check(
      'dead_letter_resolution_check',
      sql`(status = 'open') = (resolved_at IS NULL) AND (status = 'open' OR resolved_by IS NOT NULL)`,
    ),
    foreignKey({
      name: 'fk_dead_letter_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    foreignKey({
      name: 'fk_dead_letter_segment',
      columns: [t.tenantId, t.segmentId],
      foreignColumns: [replyOutbox.tenantId, replyOutbox.segmentId],
    }),
    foreignKey({
      name: 'fk_dead_letter_invocation',
      columns: [t.tenantId, t.invocationId],
      foreignColumns: [toolInvocation.tenantId, toolInvocation.invocationId],
    }),
    index('dead_letter_tenant_status_created_idx').on(t.tenantId, t.status, t.createdAt.desc()),
  ],
);
