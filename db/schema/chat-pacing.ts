import {
  type AnyPgColumn,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { tenant } from './tenant';

/**
 * Outbound pacing per chat, shared by every worker: the earliest time the next message may go to
 * this chat. A send reserves a slot by moving it forward (per-chat rate under the provider's limit),
 * and a provider's 429 retry_after moves it past the penalty, so no worker sends to that chat early.
 */
export const chatPacing = pgTable(
  'chat_pacing',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    bindingId: text('binding_id').notNull(),
    chatId: text('chat_id').notNull(),
    nextAllowedAt: timestamp('next_allowed_at', { withTimezone: true }).notNull().defaultNow(),
    penaltyUntil: timestamp('penalty_until', { withTimezone: true }),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'chat_pacing_pkey', columns: [t.tenantId, t.bindingId, t.chatId] }),
  ],
);
