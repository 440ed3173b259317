import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  check,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { tenant } from './tenant';

/**
 * Status-change events written by transition_tenant_status in the same transaction as the status
 * update (seed DDL, normative). Only the SECURITY DEFINER function inserts here.
 */
export const tenantStatusChangeOutbox = pgTable(
  'tenant_status_change_outbox',
  {
    eventId: bigint('event_id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    tenantId: text('tenant_id')
      .notNull()
      .references((): AnyPgColumn => tenant.tenantId),
    previousStatus: text('previous_status', { enum: ['active', 'suspended'] }).notNull(),
    nextStatus: text('next_status', { enum: ['active', 'suspended', 'disabled'] }).notNull(),
    actorType: text('actor_type').notNull(),
    actorId: text('actor_id').notNull(),
    reason: text('reason').notNull(),
    previousVersion: bigint('previous_version', { mode: 'number' }).notNull(),
    nextVersion: bigint('next_version', { mode: 'number' }).notNull(),
    correlationId: text('correlation_id').notNull(),
    occurredAt: timestamp('occurred_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t): PgTableExtraConfigValue[] => [
    check('tscho_previous_status_check', sql`previous_status IN ('active', 'suspended')`),
    check('tscho_next_status_check', sql`next_status IN ('active', 'suspended', 'disabled')`),
    check('tscho_actor_type_check', sql`length(btrim(actor_type)) > 0`),
    check('tscho_actor_id_check', sql`length(btrim(actor_id)) > 0`),
    check('tscho_reason_check', sql`length(btrim(reason)) BETWEEN 1 AND 1000`),
    check('tscho_correlation_id_check', sql`length(btrim(correlation_id)) > 0`),
    check(
      'tscho_transition_check',
      sql`(previous_status, next_status) IN (('active', 'suspended'), ('active', 'disabled'), ('suspended', 'active'), ('suspended', 'disabled'))`,
    ),
    check('tscho_version_step_check', sql`next_version = previous_version + 1`),
    index('tscho_tenant_event_idx').on(t.tenantId, t.eventId),
  ],
);
