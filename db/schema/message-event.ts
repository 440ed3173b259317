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
  unique,
} from 'drizzle-orm/pg-core';
import { channelBinding } from './channel-binding';
import { checkJsonObject, createdAt, SHA256_HEX_PATTERN, updatedAt } from './columns';
import { atLeastDomain, inDomain, matchesDomain, notBlankDomain, runtimeIdDomain } from './domains';
import { session } from './session';

export const MESSAGE_EVENT_KINDS = ['text', 'unsupported'] as const;
export type MessageEventKind = (typeof MESSAGE_EVENT_KINDS)[number];
/** Seed state machine: received → running → completed → reply_pending → replied, plus repair and failure. */
export const MESSAGE_EVENT_STATUSES = [
  'received',
  'running',
  'execution_reconciling',
  'completed',
  'reply_pending',
  'replied',
  'failed',
] as const;
export type MessageEventStatus = (typeof MESSAGE_EVENT_STATUSES)[number];

/**
 * One verified inbound message and its execution. Every execution write is a CAS on
 * execution_fencing_token; `completed` and later pin reply_id / reply_cache_ref / segment_count,
 * the only source for materialising and repairing reply_outbox.
 */
export const messageEvent = pgTable(
  'message_event',
  {
    tenantId: text('tenant_id').notNull(),
    eventId: runtimeIdDomain('message_event_event_id', 'evt')('event_id').notNull(),
    sessionId: text('session_id').notNull(),
    bindingId: text('binding_id').notNull(),
    externalMessageId: notBlankDomain(
      'message_event_external_message_id',
      500,
    )('external_message_id').notNull(),
    idempotencyKey: notBlankDomain('message_event_idempotency_key', 200)('idempotency_key').notNull(),
    eventSeq: atLeastDomain('message_event_event_seq', 'bigint', 1)('event_seq').notNull(),
    kind: inDomain('message_event_kind', MESSAGE_EVENT_KINDS)('kind').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    payloadDigest: matchesDomain(
      'message_event_payload_digest',
      SHA256_HEX_PATTERN,
    )('payload_digest').notNull(),
    status: inDomain('message_event_status', MESSAGE_EVENT_STATUSES)('status').notNull().default('received'),
    outcome: text('outcome'),
    failureReason: text('failure_reason'),
    requestId: notBlankDomain('message_event_request_id', 200)('request_id').notNull(),
    traceId: text('trace_id'),
    workflowId: text('workflow_id'),
    workflowStartedAt: timestamp('workflow_started_at', { withTimezone: true }),
    executionOwner: text('execution_owner'),
    executionClaimToken: text('execution_claim_token'),
    executionLeaseExpiresAt: timestamp('execution_lease_expires_at', { withTimezone: true }),
    executionFencingToken: atLeastDomain(
      'message_event_fencing_token',
      'bigint',
      0,
    )('execution_fencing_token')
      .notNull()
      .default(0),
    executionHeartbeatAt: timestamp('execution_heartbeat_at', { withTimezone: true }),
    executionAttempts: atLeastDomain(
      'message_event_execution_attempts',
      'integer',
      0,
    )('execution_attempts')
      .notNull()
      .default(0),
    executionPlan: jsonb('execution_plan').$type<Record<string, unknown>>(),
    replyId: runtimeIdDomain('message_event_reply_id', 'rep')('reply_id'),
    replyCacheRef: text('reply_cache_ref'),
    segmentCount: atLeastDomain('message_event_segment_count', 'integer', 0)('segment_count'),
    createdAt: createdAt(),
    committedAt: timestamp('committed_at', { withTimezone: true }),
    updatedAt: updatedAt(),
    /** Repair runs started for this message (each under workflow id `repair-<n>-<key>`). */
    repairCount: atLeastDomain(
      'message_event_repair_count',
      'integer',
      0,
    )('repair_count')
      .notNull()
      .default(0),
    /** Set while the message waits for a tenant concurrency permit (queued by arrival: created_at). */
    permitRequestedAt: timestamp('permit_requested_at', { withTimezone: true }),
    /** When the repair sweeper last found this message's workflow alive (rotates its checks). */
    sweepCheckedAt: timestamp('sweep_checked_at', { withTimezone: true }),
    /**
     * The event whose turn answered this message (conversation policy collect / interrupt): set on
     * every source message of a merged turn, the turn's own event pointing at itself. A message
     * merged into another one has no reply of its own and ends with that event.
     */
    mergedInto: text('merged_into'),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'message_event_pkey', columns: [t.tenantId, t.eventId] }),
    unique('message_event_tenant_idempotency_key_unique').on(t.tenantId, t.idempotencyKey),
    unique('message_event_tenant_session_seq_unique').on(t.tenantId, t.sessionId, t.eventSeq),
    unique('message_event_tenant_binding_external_unique').on(t.tenantId, t.bindingId, t.externalMessageId),
    unique('message_event_tenant_reply_unique').on(t.tenantId, t.replyId),
    // Target of reply_outbox's FK: a segment must carry its event's pinned reply_id and segment_count.
    unique('message_event_pinned_reply_unique').on(t.tenantId, t.eventId, t.replyId, t.segmentCount),
    checkJsonObject('message_event_payload_check', 'payload'),
    check(
      'message_event_execution_plan_check',
      sql`execution_plan IS NULL OR jsonb_typeof(execution_plan) = 'object'`,
    ),
    // Seed: running holds an owner, a claim token, a lease deadline and a (claimed, so ≥ 1) fence.
    check(
      'message_event_running_claim_check',
      sql`status <> 'running' OR (execution_owner IS NOT NULL AND execution_claim_token IS NOT NULL AND execution_lease_expires_at IS NOT NULL AND execution_fencing_token >= 1)`,
    ),
    // Seed: completed and later states have pinned the reply they will deliver (a message merged
    // into another one's turn is answered by that turn's reply).
    check(
      'message_event_pinned_reply_check',
      sql`status NOT IN ('completed', 'reply_pending', 'replied') OR (reply_id IS NOT NULL AND reply_cache_ref IS NOT NULL AND segment_count IS NOT NULL) OR (merged_into IS NOT NULL AND merged_into <> event_id)`,
    ),
    foreignKey({
      name: 'fk_message_event_session',
      columns: [t.tenantId, t.sessionId],
      foreignColumns: [session.tenantId, session.sessionId],
    }),
    foreignKey({
      name: 'fk_message_event_binding',
      columns: [t.tenantId, t.bindingId],
      foreignColumns: [channelBinding.tenantId, channelBinding.bindingId],
    }),
    index('message_event_tenant_created_idx').on(t.tenantId, t.createdAt.desc(), t.eventId.desc()),
    index('message_event_tenant_status_created_idx').on(t.tenantId, t.status, t.createdAt.desc()),
    // The reconciler's scan for rows whose workflow never started (crash between insert and start).
    // Permit waiters of a tenant in arrival order (execution_start grants the oldest first).
    index('message_event_permit_waiters_idx')
      .on(t.tenantId, t.createdAt, t.eventId)
      .where(sql`permit_requested_at IS NOT NULL`),
    // The repair sweeper's scan: every unfinished message.
    index('message_event_unfinished_idx').on(t.createdAt).where(sql`status NOT IN ('replied', 'failed')`),
    // The source messages of a merged turn (conversation policy collect / interrupt).
    index('message_event_merged_into_idx').on(t.tenantId, t.mergedInto).where(sql`merged_into IS NOT NULL`),
    index('message_event_unstarted_idx')
      .on(t.createdAt)
      .where(sql`status = 'received' AND workflow_started_at IS NULL`),
  ],
);
