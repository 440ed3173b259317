import type { Sql } from '../db/client';
import { type CandidateRow, findBindingCandidate } from '../db/queries/ingress';
import type { Channel } from '../workflows/shared';
import type { RegistryEvent } from './events';

/** Default backstop: an entry is reloaded at the latest this long after it was read. */
export const DEFAULT_REGISTRY_TTL_MS = 30_000;
/** Route digests remembered as unknown (a probe repeating one costs no statement); oldest dropped first. */
export const NEGATIVE_ENTRIES_MAX = 10_000;
/** Outbox event ids remembered per process, so a repeated delivery is applied once. */
const SEEN_OUTBOX_MAX = 4_096;

/** PostgreSQL could not be read and nothing fresh enough is cached: the caller answers 503. */
export class RegistryUnavailable extends Error {
  constructor(cause: unknown) {
    super('configuration registry unavailable', { cause });
    this.name = 'RegistryUnavailable';
  }
}

export type EventOutcome = 'applied' | 'ignored' | 'duplicate' | 'malformed';
export type FlushReason = 'listener_connected' | 'manual';

export interface RegistryStats {
  hits: number;
  misses: number;
  /** Lookups answered 503: the read failed and no entry within its TTL was cached. */
  unavailable: number;
  events: Record<EventOutcome, number>;
  flushes: number;
  entries: number;
}

/**
 * The in-process configuration cache of one API process (seeds: architecture §3 "Registry /
 * config cache"). It holds, per route-key digest, what find_binding_candidate returns: the
 * candidate binding (id, status, version, app, config), its tenant's runtime gates (id, status,
 * version, rate limit, sampling, masking) and the binding secret in its SEALED form (key id +
 * ciphertext + secret version: opened per verification, never kept in plaintext).
 *
 * Invariants:
 * - An entry is served at most `ttlMs` after the read that produced it began. Past that it is
 *   re-read; if the read fails the lookup throws RegistryUnavailable (ingress: 503), never the
 *   old entry.
 * - Any version event of a tenant (status, configuration, binding, secret) drops every entry of
 *   that tenant, and a binding event also forgets the unknown-route digests (a new binding may
 *   answer one). A read that was in flight while an event of its tenant (or a flush) happened is
 *   returned to its own caller (it is as fresh as an uncached read for a request that arrived
 *   before the event) but neither stored nor shared with a request that arrives after the event:
 *   that one reads again. So a pre-change read never serves a request made after the change.
 *   Events of other tenants do not disturb a read.
 * - `ttlMs` 0 caches nothing: every lookup is one statement, as without a registry.
 */
export interface ConfigRegistry {
  readonly ttlMs: number;
  /** The candidate behind a route-key digest, or null for an unknown route. Throws RegistryUnavailable. */
  candidate(channel: Channel, routeKeyDigest: string): Promise<CandidateRow | null>;
  /** Applies one version event (null: a payload that did not parse). */
  apply(event: RegistryEvent | null): EventOutcome;
  /** Drops a tenant's entries now: the API process that changed it reads its own writes. */
  invalidateTenant(tenantId: string): void;
  /** Drops everything (the listener (re)connected: events may have been missed). */
  flush(reason: FlushReason): void;
  stats(): RegistryStats;
}

interface Entry {
  row: CandidateRow;
  /** When the read that produced it began (ms): the conservative start of its TTL. */
  readAt: number;
}

export function createConfigRegistry(p: {
  sql: Sql;
  ttlMs: number;
  now?: () => number;
  /** Test hook: replaces the read (e.g. to make PostgreSQL unreachable). */
  read?: (channel: Channel, digest: string) => Promise<CandidateRow | null>;
}): ConfigRegistry {
  const now = p.now ?? (() => Date.now());
  const read = p.read ?? ((channel: Channel, digest: string) => findBindingCandidate(p.sql, channel, digest));
  const ttl = p.ttlMs;
  const entries = new Map<string, Entry>();
  const byTenant = new Map<string, Set<string>>();
  const unknown = new Map<string, number>();
  /** Reads under way, with the clock when each began (a later request joins only a fresh one). */
  const inflight = new Map<string, { promise: Promise<CandidateRow | null>; startedAt: number }>();
  const seenOutbox = new Set<number>();
  // A logical clock ticked by every event, invalidation and flush, and when each last touched what:
  // a read begun at clock c is stale if anything that could change its answer ticked after c.
  let clock = 0;
  let flushedAt = 0;
  /** Last binding event or invalidation: may turn an unknown route into a known one. */
  let routesChangedAt = 0;
  const tenantChangedAt = new Map<string, number>();
  const changedSince = (row: CandidateRow | null, startedAt: number) =>
    flushedAt > startedAt ||
    (row === null ? routesChangedAt > startedAt : (tenantChangedAt.get(row.tenant_id) ?? 0) > startedAt);
  const touchTenant = (tenantId: string) => {
    clock++;
    tenantChangedAt.delete(tenantId); // re-inserted last: the map stays ordered by age
    tenantChangedAt.set(tenantId, clock);
    // A mark matters only to reads begun before it: marks older than every read in flight can go.
    if (tenantChangedAt.size > NEGATIVE_ENTRIES_MAX) {
      const oldest = Math.min(clock, ...[...inflight.values()].map((f) => f.startedAt));
      for (const [t, at] of tenantChangedAt) {
        if (at >= oldest || tenantChangedAt.size <= NEGATIVE_ENTRIES_MAX / 2) break;
        tenantChangedAt.delete(t);
      }
    }
  };
  const stats: RegistryStats = {
    hits: 0,
    misses: 0,
    unavailable: 0,
    events: { applied: 0, ignored: 0, duplicate: 0, malformed: 0 },
    flushes: 0,
    entries: 0,
  };

  const dropTenant = (tenantId: string): boolean => {
    const keys = byTenant.get(tenantId);
    if (!keys) return false;
    for (const key of keys) entries.delete(key);
    byTenant.delete(tenantId);
    return true;
  };

  const store = (key: string, row: CandidateRow | null, readAt: number) => {
    if (row === null) {
      unknown.delete(key);
      unknown.set(key, readAt);
      if (unknown.size > NEGATIVE_ENTRIES_MAX) unknown.delete(unknown.keys().next().value as string);
      return;
    }
    entries.set(key, { row: deepFreeze(row), readAt });
    const keys = byTenant.get(row.tenant_id) ?? new Set<string>();
    keys.add(key);
    byTenant.set(row.tenant_id, keys);
  };

  const load = async (
    key: string,
    channel: Channel,
    digest: string,
    startedAt: number,
  ): Promise<CandidateRow | null> => {
    const readAt = now();
    let row: CandidateRow | null;
    try {
      row = await read(channel, digest);
    } catch (err) {
      stats.unavailable++;
      throw new RegistryUnavailable(err);
    }
    if (ttl > 0 && !changedSince(row, startedAt)) store(key, row, readAt);
    return row;
  };

  return {
    ttlMs: ttl,
    async candidate(channel, digest) {
      if (ttl <= 0) {
        stats.misses++;
        return load('', channel, digest, clock);
      }
      const key = `${channel}:${digest}`;
      const t = now();
      const entry = entries.get(key);
      if (entry) {
        if (t - entry.readAt < ttl) {
          stats.hits++;
          return entry.row;
        }
        entries.delete(key); // past its TTL: never served again, whatever the re-read does
        byTenant.get(entry.row.tenant_id)?.delete(key);
      }
      const unknownAt = unknown.get(key);
      if (unknownAt !== undefined) {
        if (t - unknownAt < ttl) {
          stats.hits++;
          return null;
        }
        unknown.delete(key);
      }
      // Concurrent misses of one key share one read (a cold start under load is one statement) —
      // unless what it reads changed after it began: then this request, which arrived after the
      // change, must not get the older answer, and reads for itself.
      const pending = inflight.get(key);
      if (pending) {
        // Nothing at all happened since it began: as good as this request's own read.
        const quiet = clock === pending.startedAt;
        const row = await pending.promise;
        if (quiet || !changedSince(row, pending.startedAt)) return row;
      }
      stats.misses++;
      const startedAt = clock;
      const promise = load(key, channel, digest, startedAt).finally(() => {
        if (inflight.get(key)?.promise === promise) inflight.delete(key);
      });
      inflight.set(key, { promise, startedAt });
      return promise;
    },
    apply(event) {
      if (!event) {
        stats.events.malformed++;
        return 'malformed';
      }
      if (event.k === 'tenant_status') {
        if (seenOutbox.has(event.e)) {
          stats.events.duplicate++;
          return 'duplicate';
        }
        seenOutbox.add(event.e);
        if (seenOutbox.size > SEEN_OUTBOX_MAX) seenOutbox.delete(seenOutbox.values().next().value as number);
      }
      let outcome: EventOutcome;
      switch (event.k) {
        case 'tenant_status':
        case 'tenant':
        case 'binding':
        case 'secret':
          touchTenant(event.t);
          if (event.k === 'binding') {
            routesChangedAt = clock;
            unknown.clear();
          }
          outcome = dropTenant(event.t) ? 'applied' : 'ignored';
          break;
        case 'app':
        case 'model_profile':
        case 'backend_profile':
          // Not read at ingress (the worker pins the plan from PostgreSQL): nothing cached here.
          outcome = 'ignored';
          break;
        default: {
          const exhaustive: never = event;
          return exhaustive;
        }
      }
      stats.events[outcome]++;
      return outcome;
    },
    invalidateTenant(tenantId) {
      touchTenant(tenantId);
      routesChangedAt = clock;
      unknown.clear();
      dropTenant(tenantId);
    },
    flush() {
      clock++;
      flushedAt = clock;
      stats.flushes++;
      entries.clear();
      byTenant.clear();
      unknown.clear();
    },
    stats: () => ({ ...stats, events: { ...stats.events }, entries: entries.size }),
  };
}

/** Cached rows are shared by concurrent requests: nothing may change one in place. */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Buffer.isBuffer(value) && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
