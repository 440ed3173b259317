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
 *   answer one). A read that was in flight while any event or flush happened is returned to its
 *   caller (it is as fresh as an uncached read) but not stored, so a pre-change read can never
 *   outlive the event that invalidated it.
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
  const inflight = new Map<string, Promise<CandidateRow | null>>();
  const seenOutbox = new Set<number>();
  /** Bumped by every event and flush; a read stores its result only if it did not move meanwhile. */
  let epoch = 0;
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

  const load = async (key: string, channel: Channel, digest: string): Promise<CandidateRow | null> => {
    const startedEpoch = epoch;
    const readAt = now();
    let row: CandidateRow | null;
    try {
      row = await read(channel, digest);
    } catch (err) {
      stats.unavailable++;
      throw new RegistryUnavailable(err);
    }
    if (ttl > 0 && startedEpoch === epoch) store(key, row, readAt);
    return row;
  };

  return {
    ttlMs: ttl,
    async candidate(channel, digest) {
      if (ttl <= 0) {
        stats.misses++;
        return load('', channel, digest);
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
      }
      const unknownAt = unknown.get(key);
      if (unknownAt !== undefined) {
        if (t - unknownAt < ttl) {
          stats.hits++;
          return null;
        }
        unknown.delete(key);
      }
      // Concurrent misses of one key share one read (a cold start under load is one statement).
      const pending = inflight.get(key);
      if (pending) return pending;
      stats.misses++;
      const promise = load(key, channel, digest).finally(() => inflight.delete(key));
      inflight.set(key, promise);
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
          epoch++;
          if (event.k === 'binding') unknown.clear();
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
      epoch++;
      unknown.clear();
      dropTenant(tenantId);
    },
    flush() {
      epoch++;
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
