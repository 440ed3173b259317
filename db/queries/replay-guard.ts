import type { Sql } from 'postgres';
import { encodeTuple, sha256Hex } from '../../lib/digest';
import { withTenantTx } from '../tx';

/**
 * WeCom nonce replay guard (table `ingress_replay_guard`, tenant-less, keyed by route-key digest).
 *
 * The problem: WeCom re-delivers a message it got no timely answer for, and a re-delivery is
 * byte-identical — same `timestamp`, `nonce`, `msg_signature` and body. The contract makes that a
 * duplicate (200, nothing new), decided by message-level de-duplication after trust. What the guard
 * must refuse is a *different* payload presented under a nonce already used on this route.
 *
 * The design, with the existing two-column key (route_key_digest, nonce), one claim writes two rows
 * in one statement, in one transaction:
 *   `n:` sha256(nonce)                            — the nonce itself, one per route
 *   `s:` sha256(len-prefixed(nonce, msg_signature)) — this nonce *with this exact request*
 * `msg_signature` covers token, timestamp, nonce and the whole ciphertext, so it identifies the
 * request byte for byte (two requests with one signature are the same request). With
 * `ON CONFLICT DO NOTHING … RETURNING`:
 *   2 rows inserted → first sight of this nonce                                → `fresh`
 *   0 rows inserted → this nonce with this very signature was seen: a retry     → `retry` (let through)
 *   only `s:` new   → nonce seen with a DIFFERENT request                       → `replayed`; the
 *                     transaction is rolled back so the refused request leaves no row (a later
 *                     identical copy of it stays refused instead of passing as a "retry")
 *   only `n:` new   → cannot happen (rows are pruned in pairs: same seen_at); treated as `fresh`
 * Concurrency is settled by the primary key: a second transaction inserting the same `n:` row waits
 * for the first to commit or roll back, so two different payloads racing on one nonce cannot both
 * be `fresh`, and concurrent identical retries both see `retry`.
 * Both values are hashes (66 chars, inside the column's 1..128 check), so nonce length or content
 * never matters and nothing request-supplied is stored verbatim.
 *
 * Durable window: a request is accepted only while |now − timestamp| ≤ window, and its nonce row is
 * written at seen_at ≥ timestamp − window, so the same signed request is unusable after
 * seen_at + 2·window. Rows are kept for 2·window plus a clock-skew margin, measured on the database
 * clock (one clock for every API instance), and pruned opportunistically.
 *
 * Schema note: a dedicated `signature_digest` column (PK still (route_key_digest, nonce)) would let
 * one row carry both facts; the two-row encoding gives the same semantics with the table as it is.
 */
export type NonceClaim = 'fresh' | 'retry' | 'replayed';

export const REPLAY_SKEW_MARGIN_S = 60;

class Replayed extends Error {}

export async function claimNonce(
  sql: Sql,
  p: { routeKeyDigest: string; nonce: string; signature: string },
): Promise<NonceClaim> {
  const nonceKey = `n:${sha256Hex(encodeTuple(['nonce', p.nonce]))}`;
  const requestKey = `s:${sha256Hex(encodeTuple(['nonce+signature', p.nonce, p.signature]))}`;
  try {
    return await withTenantTx(sql, { role: 'tenant_app_writer', tenantId: null }, async (tx) => {
      const rows = await tx<{ nonce: string }[]>`
        insert into ingress_replay_guard (route_key_digest, nonce)
        values (${p.routeKeyDigest}, ${nonceKey}), (${p.routeKeyDigest}, ${requestKey})
        on conflict (route_key_digest, nonce) do nothing
        returning nonce`;
      const inserted = new Set(rows.map((r) => r.nonce));
      if (inserted.size === 0) return 'retry';
      if (!inserted.has(nonceKey)) throw new Replayed(); // roll back the `s:` row
      return 'fresh';
    });
  } catch (err) {
    if (err instanceof Replayed) return 'replayed';
    throw err;
  }
}

/**
 * Deletes guard rows older than 2·window + margin (database clock), at most `limit` per call, so
 * an opportunistic prune on the request path stays cheap. Returns the number deleted.
 */
export async function pruneReplayGuard(
  sql: Sql,
  p: { windowSeconds: number; limit?: number },
): Promise<number> {
  const keepSeconds = 2 * p.windowSeconds + REPLAY_SKEW_MARGIN_S;
  const limit = p.limit ?? 500;
  return withTenantTx(sql, { role: 'tenant_app_writer', tenantId: null }, async (tx) => {
    const rows = await tx`
      delete from ingress_replay_guard
      where ctid in (
        select ctid from ingress_replay_guard
        where seen_at < now() - make_interval(secs => ${keepSeconds})
        limit ${limit})`;
    return rows.count;
  });
}
