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
import { channelBinding } from './channel-binding';
import { createdAt, updatedAt } from './columns';
import { inDomain, notBlankDomain } from './domains';
import { messageEvent } from './message-event';

/**
 * reserved   the placeholder is about to be sent (no message id yet): no attempt sends another
 * open       the placeholder is in the chat (provider_message_id): turns edit it, delivery finishes it
 * abandoned  the placeholder send failed or its outcome is unknown: no draft for this message
 * delivered  the reply's first text segment was delivered by editing it
 * replaced   an edit was refused: the segment went by sendMessage (the draft deleted, best effort)
 * deleted    the reply had no text segment: the draft was deleted (best effort)
 */
export const LIVE_DRAFT_STATES = [
  'reserved',
  'open',
  'abandoned',
  'delivered',
  'replaced',
  'deleted',
] as const;
export type LiveDraftState = (typeof LIVE_DRAFT_STATES)[number];

/**
 * The one placeholder message of a live draft (binding config.live_drafts, a streaming model
 * profile; activities/live-drafts.ts): at most one per message, so a retried or repeated model
 * turn of the same execution edits the same message instead of sending another. Written under the
 * execution's fence (`fencing_token`: the attempt that reserved it). The reply's outbox stays the
 * durable truth: delivery edits this message to its first text segment, or sends that segment.
 */
export const liveDraft = pgTable(
  'live_draft',
  {
    tenantId: text('tenant_id').notNull(),
    eventId: text('event_id').notNull(),
    bindingId: text('binding_id').notNull(),
    chatId: notBlankDomain('live_draft_chat_id', 200)('chat_id').notNull(),
    threadId: text('thread_id'),
    providerMessageId: notBlankDomain('live_draft_provider_message_id', 100)('provider_message_id'),
    state: inDomain('live_draft_state', LIVE_DRAFT_STATES)('state').notNull().default('reserved'),
    fencingToken: bigint('fencing_token', { mode: 'number' }).notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'live_draft_pkey', columns: [t.tenantId, t.eventId] }),
    // Only a reservation, or one given up, may lack the placeholder's message id.
    check(
      'live_draft_message_id_check',
      sql`state IN ('reserved', 'abandoned') OR provider_message_id IS NOT NULL`,
    ),
    foreignKey({
      name: 'fk_live_draft_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    foreignKey({
      name: 'fk_live_draft_binding',
      columns: [t.tenantId, t.bindingId],
      foreignColumns: [channelBinding.tenantId, channelBinding.bindingId],
    }),
  ],
);
