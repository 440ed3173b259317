import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
} from 'drizzle-orm/pg-core';
import { CHANNELS } from './channel-binding';
import { checkJsonObject, createdAt, updatedAt } from './columns';
import { atLeastDomain, inDomain, notBlankDomain, runtimeIdDomain } from './domains';
import { messageEvent } from './message-event';

export const REPLY_SEGMENT_STATUSES = [
  'pending',
  'sending',
  'reconciling',
  'sent',
  'retryable',
  'unknown',
  'failed',
  'discarded',
] as const;
export type ReplySegmentStatus = (typeof REPLY_SEGMENT_STATUSES)[number];
/** text: `content` is the text; image / file: an attachment, `payload_ref` its artifact id, `content` its caption. */
export const REPLY_SEGMENT_KINDS = ['text', 'image', 'file'] as const;
export type ReplySegmentKind = (typeof REPLY_SEGMENT_KINDS)[number];

/**
 * One outbound segment of a pinned reply. A composite FK ties (event_id, reply_id, segment_count)
 * to the event's pinned values, so an outbox row can never belong to another event's reply or
 * disagree with the pinned segment count. Sends are claimed (owner, lease, fence) and de-duplicated
 * by idempotency_key; an unconfirmable outcome is `unknown`, never a blind resend.
 */
export const replyOutbox = pgTable(
  'reply_outbox',
  {
    tenantId: text('tenant_id').notNull(),
    segmentId: runtimeIdDomain('reply_outbox_segment_id', 'seg')('segment_id').notNull(),
    eventId: text('event_id').notNull(),
    replyId: text('reply_id').notNull(),
    idempotencyKey: notBlankDomain('reply_outbox_idempotency_key', 200)('idempotency_key').notNull(),
    segmentIndex: integer('segment_index').notNull(),
    segmentCount: integer('segment_count').notNull(),
    channel: inDomain('reply_outbox_channel', CHANNELS)('channel').notNull(),
    target: jsonb('target').$type<Record<string, unknown>>().notNull(),
    content: text('content').notNull(),
    payloadRef: text('payload_ref'),
    segmentKind: inDomain(
      'reply_outbox_segment_kind',
      REPLY_SEGMENT_KINDS,
    )('segment_kind')
      .notNull()
      .default('text'),
    status: inDomain('reply_outbox_status', REPLY_SEGMENT_STATUSES)('status').notNull().default('pending'),
    attempts: atLeastDomain('reply_outbox_attempts', 'integer', 0)('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }),
    claimOwner: text('claim_owner'),
    claimToken: text('claim_token'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    fencingToken: atLeastDomain(
      'reply_outbox_fencing_token',
      'bigint',
      0,
    )('fencing_token')
      .notNull()
      .default(0),
    providerMessageId: text('provider_message_id'),
    lastError: text('last_error'),
    lastReconciledAt: timestamp('last_reconciled_at', { withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    sentAt: timestamp('sent_at', { withTimezone: true }),
    /**
     * Console segments only: the order they were sent in, across the messages of a conversation,
     * set when one becomes `sent` (trigger of migration 0033). Sends of one conversation take its
     * lock first, so this order is their commit order: a reader's cursor "after N" misses none,
     * including a segment of a reopened message sent long after its neighbours.
     */
    sentSeq: bigint('sent_seq', { mode: 'number' }),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'reply_outbox_pkey', columns: [t.tenantId, t.segmentId] }),
    unique('reply_outbox_reply_segment_unique').on(t.tenantId, t.replyId, t.segmentIndex),
    unique('reply_outbox_idempotency_key_unique').on(t.tenantId, t.idempotencyKey),
    check('reply_outbox_segment_index_check', sql`segment_index >= 0 AND segment_index < segment_count`),
    checkJsonObject('reply_outbox_target_check', 'target'),
    check('reply_outbox_payload_ref_check', sql`segment_kind = 'text' OR payload_ref IS NOT NULL`),
    check('reply_outbox_sent_at_check', sql`status <> 'sent' OR sent_at IS NOT NULL`),
    foreignKey({
      name: 'fk_reply_outbox_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    foreignKey({
      name: 'fk_reply_outbox_pinned_reply',
      columns: [t.tenantId, t.eventId, t.replyId, t.segmentCount],
      foreignColumns: [
        messageEvent.tenantId,
        messageEvent.eventId,
        messageEvent.replyId,
        messageEvent.segmentCount,
      ],
    }),
    index('reply_outbox_tenant_event_idx').on(t.tenantId, t.eventId, t.segmentIndex),
    // Retention asks whether an unsent segment still needs an artifact (housekeeping).
    index('reply_outbox_payload_ref_idx').on(t.tenantId, t.payloadRef).where(sql`payload_ref IS NOT NULL`),
  ],
);
