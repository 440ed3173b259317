import {
  bigint,
  foreignKey,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { checkNonNegative } from './columns';
import { messageEvent } from './message-event';

/**
 * One of a tenant's `max_concurrent_executions` permits, held by one running execution. Acquired in
 * arrival order by execution_start (waiters carry message_event.permit_requested_at), released in
 * the same transaction as the holder's status leaves `running` (a trigger), when it parks on an
 * operator (manual / approval) or by the repair sweeper; so a permit never outlives its holder.
 */
export const executionPermit = pgTable(
  'execution_permit',
  {
    tenantId: text('tenant_id').notNull(),
    eventId: text('event_id').notNull(),
    /** the holder's execution fencing token when it acquired the permit */
    fencingToken: bigint('fencing_token', { mode: 'number' }).notNull(),
    acquiredAt: timestamp('acquired_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'execution_permit_pkey', columns: [t.tenantId, t.eventId] }),
    checkNonNegative('execution_permit_fencing_token_check', 'fencing_token'),
    foreignKey({
      name: 'fk_execution_permit_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
  ],
);
