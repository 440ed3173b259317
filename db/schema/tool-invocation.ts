import { sql } from 'drizzle-orm';
import {
  boolean,
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
import { createdAt, SHA256_HEX_PATTERN, updatedAt } from './columns';
import {
  atLeastDomain,
  inDomain,
  lengthDomain,
  matchesDomain,
  notBlankDomain,
  runtimeIdDomain,
} from './domains';
import { messageEvent } from './message-event';
import { session } from './session';

export const TOOL_INVOCATION_STATUSES = [
  'prepared',
  'dispatching',
  'accepted',
  'rejected',
  'unknown',
  'reconciling',
  'manual',
  'failed',
  'awaiting_approval',
  'refused',
] as const;
export type ToolInvocationStatus = (typeof TOOL_INVOCATION_STATUSES)[number];

/**
 * One tool call of one execution. `prepared` is durable before any side effect; the external
 * Idempotency-Key (idempotency_key) is reused on every attempt; unknown outcomes are reconciled by
 * that key and never blindly re-dispatched. (tenant_id, event_id, idempotency_key) is unique.
 */
export const toolInvocation = pgTable(
  'tool_invocation',
  {
    tenantId: text('tenant_id').notNull(),
    invocationId: runtimeIdDomain('tool_invocation_invocation_id', 'inv')('invocation_id').notNull(),
    eventId: text('event_id').notNull(),
    sessionId: text('session_id').notNull(),
    toolName: matchesDomain('tool_invocation_tool_name', {
      regex: '^[A-Za-z0-9_-]+$',
      minLength: 1,
      maxLength: 64,
    })('tool_name').notNull(),
    toolCapabilityDigest: matchesDomain(
      'tool_invocation_capability_digest',
      SHA256_HEX_PATTERN,
    )('tool_capability_digest').notNull(),
    idempotencyKey: notBlankDomain('tool_invocation_idempotency_key', 200)('idempotency_key').notNull(),
    requestDigest: matchesDomain(
      'tool_invocation_request_digest',
      SHA256_HEX_PATTERN,
    )('request_digest').notNull(),
    requestRef: text('request_ref'),
    arguments: jsonb('arguments').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    status: inDomain(
      'tool_invocation_status',
      TOOL_INVOCATION_STATUSES,
    )('status')
      .notNull()
      .default('prepared'),
    attempts: atLeastDomain('tool_invocation_attempts', 'integer', 0)('attempts').notNull().default(0),
    claimOwner: text('claim_owner'),
    claimToken: text('claim_token'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    fencingToken: atLeastDomain(
      'tool_invocation_fencing_token',
      'bigint',
      0,
    )('fencing_token')
      .notNull()
      .default(0),
    providerReceiptRef: text('provider_receipt_ref'),
    providerReceipt: jsonb('provider_receipt'),
    resultRef: text('result_ref'),
    lastError: text('last_error'),
    requiresApproval: boolean('requires_approval').notNull().default(false),
    approvalDeadline: timestamp('approval_deadline', { withTimezone: true }),
    resolution: jsonb('resolution').$type<Record<string, unknown>>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    dispatchedAt: timestamp('dispatched_at', { withTimezone: true }),
    reconciledAt: timestamp('reconciled_at', { withTimezone: true }),
    resolvedAt: timestamp('resolved_at', { withTimezone: true }),
    /** The model turn (0-based) and the call's position in it: with the tool name and the
     * arguments' digest they make the idempotency key, never the model's own call id. */
    step: integer('step'),
    callOrdinal: integer('call_ordinal'),
    /** The model's id of the call, kept so a resumed turn shows the model its own transcript. */
    modelCallId: lengthDomain('tool_invocation_model_call_id', 200)('model_call_id'),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'tool_invocation_pkey', columns: [t.tenantId, t.invocationId] }),
    unique('tool_invocation_event_idempotency_unique').on(t.tenantId, t.eventId, t.idempotencyKey),
    check('tool_invocation_arguments_check', sql`jsonb_typeof(arguments) = 'object'`),
    check('tool_invocation_resolution_check', sql`resolution IS NULL OR jsonb_typeof(resolution) = 'object'`),
    check('tool_invocation_approval_check', sql`status <> 'awaiting_approval' OR requires_approval`),
    foreignKey({
      name: 'fk_tool_invocation_event',
      columns: [t.tenantId, t.eventId],
      foreignColumns: [messageEvent.tenantId, messageEvent.eventId],
    }),
    foreignKey({
      name: 'fk_tool_invocation_session',
      columns: [t.tenantId, t.sessionId],
      foreignColumns: [session.tenantId, session.sessionId],
    }),
    check(
      'tool_invocation_position_check',
      sql`(step IS NULL) = (call_ordinal IS NULL) AND coalesce(step, 0) >= 0 AND coalesce(call_ordinal, 0) >= 0`,
    ),
    index('tool_invocation_tenant_status_created_idx').on(t.tenantId, t.status, t.createdAt.desc()),
  ],
);
