import { sql } from 'drizzle-orm';
import {
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
import { createdAt, updatedAt } from './columns';
import { atLeastDomain, inDomain, notBlankDomain, runtimeIdDomain } from './domains';

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
    sessionId: runtimeIdDomain('session_session_id', 'ses')('session_id').notNull(),
    bindingId: text('binding_id').notNull(),
    appId: text('app_id').notNull(),
    kind: inDomain('session_kind', SESSION_KINDS)('kind').notNull(),
    externalUserId: text('external_user_id'),
    externalChatId: text('external_chat_id'),
    externalThreadId: text('external_thread_id'),
    identityKey: notBlankDomain('session_identity_key', 2000)('identity_key').notNull(),
    status: inDomain('session_status', SESSION_STATUSES)('status').notNull().default('active'),
    stateVersion: atLeastDomain('session_state_version', 'bigint', 0)('state_version').notNull().default(0),
    lastEventSeq: atLeastDomain('session_last_event_seq', 'bigint', 0)('last_event_seq').notNull().default(0),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'session_pkey', columns: [t.tenantId, t.sessionId] }),
    unique('session_tenant_binding_identity_unique').on(t.tenantId, t.bindingId, t.identityKey),
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
