import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
} from 'drizzle-orm/pg-core';
import { agentApp } from './agent-app';
import { channelBinding } from './channel-binding';
import { checkIn, checkNonNegative, checkNotBlank, checkRuntimeId, createdAt, updatedAt } from './columns';

export const SESSION_KINDS = ['direct', 'group', 'thread'] as const;
export type SessionKind = (typeof SESSION_KINDS)[number];
export const SESSION_STATUSES = ['active', 'closed'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/**
 * A conversation lane. identity_key is the application's structured (length-prefixed) encoding of
 * the kind's identity tuple — direct: user; group: chat; thread: chat + thread — scoped by binding,
 * so the same tuple under two bindings never collides. last_event_seq allocates event_seq.
 */
export const session = pgTable(
  'session',
  {
    tenantId: text('tenant_id').notNull(),
    sessionId: text('session_id').notNull(),
    bindingId: text('binding_id').notNull(),
    appId: text('app_id').notNull(),
    kind: text('kind', { enum: SESSION_KINDS }).notNull(),
    externalUserId: text('external_user_id'),
    externalChatId: text('external_chat_id'),
    externalThreadId: text('external_thread_id'),
    identityKey: text('identity_key').notNull(),
    status: text('status', { enum: SESSION_STATUSES }).notNull().default('active'),
    stateVersion: bigint('state_version', { mode: 'number' }).notNull().default(0),
    lastEventSeq: bigint('last_event_seq', { mode: 'number' }).notNull().default(0),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'session_pkey', columns: [t.tenantId, t.sessionId] }),
    unique('session_tenant_binding_identity_unique').on(t.tenantId, t.bindingId, t.identityKey),
    checkRuntimeId('session_session_id_check', 'session_id', 'ses'),
    checkIn('session_kind_check', 'kind', SESSION_KINDS),
    checkNotBlank('session_identity_key_check', 'identity_key', 2000),
    checkIn('session_status_check', 'status', SESSION_STATUSES),
    checkNonNegative('session_state_version_check', 'state_version'),
    checkNonNegative('session_last_event_seq_check', 'last_event_seq'),
    // The identity tuple a kind is keyed by must be present (seed: Session identity 规则).
    check(
      'session_identity_tuple_check',
      sql`(kind = 'direct' AND external_user_id IS NOT NULL) OR (kind = 'group' AND external_chat_id IS NOT NULL) OR (kind = 'thread' AND external_chat_id IS NOT NULL AND external_thread_id IS NOT NULL)`,
    ),
    foreignKey({
      name: 'fk_session_binding',
      columns: [t.tenantId, t.bindingId],
      foreignColumns: [channelBinding.tenantId, channelBinding.bindingId],
    }),
    foreignKey({
      name: 'fk_session_app',
      columns: [t.tenantId, t.appId],
      foreignColumns: [agentApp.tenantId, agentApp.appId],
    }),
  ],
);
