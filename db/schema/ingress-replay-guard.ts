import { sql } from 'drizzle-orm';
import {
  check,
  index,
  type PgTableExtraConfigValue,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { checkMatches, SHA256_HEX_PATTERN } from './columns';

/**
 * WeCom nonce replay protection, checked before any tenant is trusted, hence tenant-less and keyed
 * by the route-key digest. Rows older than the timestamp window (±300 s) may be pruned.
 */
export const ingressReplayGuard = pgTable(
  'ingress_replay_guard',
  {
    routeKeyDigest: text('route_key_digest').notNull(),
    nonce: text('nonce').notNull(),
    seenAt: timestamp('seen_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t): PgTableExtraConfigValue[] => [
    primaryKey({ name: 'ingress_replay_guard_pkey', columns: [t.routeKeyDigest, t.nonce] }),
    checkMatches('ingress_replay_guard_route_key_digest_check', 'route_key_digest', SHA256_HEX_PATTERN),
    check('ingress_replay_guard_nonce_check', sql`length(nonce) BETWEEN 1 AND 128`),
    index('ingress_replay_guard_seen_at_idx').on(t.seenAt),
  ],
);
