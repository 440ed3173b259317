import { bigint, index, type PgTableExtraConfigValue, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { CHANNELS } from './channel-binding';
import { CLASS_PATTERN, checkIn, checkMatches, checkNotBlank, SHA256_HEX_PATTERN } from './columns';

/**
 * The global, tenant-less sink for failed webhook verification. It holds no tenant, no body and
 * no secret — only what an operator needs to spot probing — and has no RLS by design.
 */
export const ingressSecurityEvent = pgTable(
  'ingress_security_event',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    requestId: text('request_id').notNull(),
    channel: text('channel', { enum: CHANNELS }).notNull(),
    routeKeyDigest: text('route_key_digest'),
    failureClass: text('failure_class').notNull(),
    occurredAt: timestamp('occurred_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t): PgTableExtraConfigValue[] => [
    checkNotBlank('ingress_security_event_request_id_check', 'request_id', 200),
    checkIn('ingress_security_event_channel_check', 'channel', CHANNELS),
    checkMatches('ingress_security_event_route_key_digest_check', 'route_key_digest', SHA256_HEX_PATTERN),
    checkMatches('ingress_security_event_failure_class_check', 'failure_class', CLASS_PATTERN),
    index('ingress_security_event_occurred_idx').on(t.occurredAt),
  ],
);
