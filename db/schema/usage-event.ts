import { sql } from 'drizzle-orm';
import {
  char,
  check,
  foreignKey,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { atLeastDomain, runtimeIdDomain } from './domains';
import { messageEvent } from './message-event';
import { modelProfile } from './model-profile';

/**
 * Immutable model-usage facts; budgets and bills aggregate these, never a mutable counter
 * (seed). Append-only: a trigger rejects UPDATE/DELETE/TRUNCATE and no role may update or delete.
 * A deterministic usage_id makes a retried activity's insert idempotent.
 */
export const usageEvent = pgTable(
  'usage_event',
  {
    tenantId: text('tenant_id').notNull(),
    usageId: runtimeIdDomain('usage_event_usage_id', 'use')('usage_id').notNull(),
    eventId: text('event_id'),
    modelProfileId: text('model_profile_id').notNull(),
    tokensIn: atLeastDomain('usage_event_tokens_in', 'bigint', 0)('tokens_in').notNull(),
    tokensOut: atLeastDomain('usage_event_tokens_out', 'bigint', 0)('tokens_out').notNull(),
    costMinor: atLeastDomain('usage_event_cost_minor', 'bigint', 0)('cost_minor').notNull().default(0),
    currency: char('currency', { length: 3 }),
    occurredAt: timestamp('occurred_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'usage_event_pkey', columns: [t.tenantId, t.usageId] }),
    check('usage_event_currency_check', sql`currency IS NULL OR currency ~ '^[A-Z]{3}$'`),
    foreignKey({
      name: 'fk_usage_event_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    foreignKey({
      name: 'fk_usage_event_model_profile',
      columns: [t.tenantId, t.modelProfileId],
      foreignColumns: [modelProfile.tenantId, modelProfile.modelProfileId],
    }),
    index('usage_event_tenant_occurred_idx').on(t.tenantId, t.occurredAt),
  ],
);
