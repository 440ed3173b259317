import type { Sql } from 'postgres';
import { isLockTimeout } from '../../db/errors';
import {
  type RecordedMessage,
  type RecordMessageParams,
  recordInboundMessage,
  recordInboundMessages,
  sessionIdentityKey,
} from '../../db/queries/ingress';

// Group commit for ingress records. Every accepted webhook is one record_inbound_message call; what
// PostgreSQL spends on each beyond the rows themselves (the round trip, the statement, the
// function's role switch, the transaction and its WAL flush) is most of its cost, and on a loaded
// API it is paid by many webhooks at once. So at most MAX_IN_FLIGHT record statements run at a
// time; a webhook that arrives while they are all busy waits for a later one, which carries every
// webhook that queued meanwhile (up to MAX_BATCH) in one statement. Nothing waits for a timer: an
// idle API sends each record at once, alone, exactly as before; batches form only under load.
//
// Order: a session's messages are recorded in the order they arrived here. A waiter whose session
// is in a statement already in flight stays queued (with every later waiter of that session) until
// that statement is done, so two statements never race for one session's next event_seq.
//
// Locks: a batch is sorted by (tenant, binding, session identity), stably, and every row of one
// tenant carries the same rate limit (the last arrived: the registry's newest view), so each
// batch takes a tenant's rate-limit window before its sessions, and the sessions in one global
// order; concurrent batches queue behind each other and do not deadlock. (The function's
// occasional prune of old windows skips rows another transaction holds, migration 0045.)
//
// Failure: an error is all or nothing (the statement is one transaction). One a row can cause (bad
// data, a constraint, a deadlock) has the batch recorded again row by row, so each webhook gets its
// own result or its own error; one the database as a whole causes (a lost connection, a timeout)
// fails every webhook of the batch at once rather than 64 times in a row.

/**
 * Record statements running at once (SWITCHYARD_INGRESS_RECORD_CONCURRENCY): two, so one batch is
 * being built and sent while the other commits. bench:ingress on 2 cores: 4 in flight gave 0.80×
 * the bare one-insert handler, 2 gave 0.87–1.06× in five runs (bigger batches, PostgreSQL's CPU per
 * webhook 444 → about 300 µs); more only helps a database with the cores to run them side by side.
 */
const MAX_IN_FLIGHT = 2;
/**
 * Rows in one statement: a bound on its size and on how long one batch holds its locks. Also at
 * most PostgreSQL's per-backend cache of subtransaction ids (64): a session's first message runs a
 * subtransaction, and a transaction with more of them slows every snapshot in the cluster.
 */
const MAX_BATCH = 64;

/**
 * How long each lock wait of a record statement may last (a chat's session row, held by a finishing
 * message or another batch; a tenant's rate-limit window; a relation lock behind DDL) before it
 * fails with 55P03 and its webhook is answered 503 (the provider delivers it again). Under the 5 s
 * WeCom gives a callback.
 */
export const INGRESS_LOCK_TIMEOUT_MS = 3_000;

export interface RecordBatcher {
  record(p: RecordMessageParams): Promise<RecordedMessage>;
  /** What it has done so far: statements sent and rows in them (tests, benchmarks). */
  stats(): { statements: number; rows: number; fallbacks: number; largest: number };
}

interface Waiting {
  p: RecordMessageParams;
  key: string;
  resolve: (r: RecordedMessage) => void;
  reject: (err: unknown) => void;
}

export function createRecordBatcher(
  sql: Sql,
  opts: { maxInFlight?: number | undefined; maxBatch?: number | undefined } = {},
): RecordBatcher {
  const maxInFlight = opts.maxInFlight ?? MAX_IN_FLIGHT;
  const maxBatch = opts.maxBatch ?? MAX_BATCH;
  if (!(Number.isInteger(maxInFlight) && maxInFlight >= 1))
    throw new Error('maxInFlight must be an integer ≥ 1');
  if (!(Number.isInteger(maxBatch) && maxBatch >= 1 && maxBatch <= MAX_BATCH))
    throw new Error(`maxBatch must be an integer in 1..${MAX_BATCH}`);
  let queue: Waiting[] = [];
  /** Sessions with a statement in flight. */
  const busy = new Set<string>();
  let inFlight = 0;
  const counts = { statements: 0, rows: 0, fallbacks: 0, largest: 0 };

  /** The next batch: queued waiters, oldest first, whose sessions are not in flight. */
  const take = (): Waiting[] => {
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    for (const w of queue) (batch.length < maxBatch && !busy.has(w.key) ? batch : rest).push(w);
    queue = rest;
    return batch;
  };

  const pump = () => {
    while (inFlight < maxInFlight && queue.length > 0) {
      const batch = take();
      if (batch.length === 0) return; // every waiter's session is in flight: its end pumps again
      for (const w of batch) busy.add(w.key);
      inFlight++;
      void send(batch)
        .catch((err: unknown) => {
          for (const w of batch) w.reject(err); // settled ones ignore it
        })
        .finally(() => {
          for (const w of batch) busy.delete(w.key);
          inFlight--;
          pump();
        });
    }
  };

  const send = async (batch: Waiting[]) => {
    counts.statements++;
    counts.rows += batch.length;
    counts.largest = Math.max(counts.largest, batch.length);
    if (batch.length === 1) {
      const [w] = batch as [Waiting];
      await recordInboundMessage(sql, w.p).then(w.resolve, w.reject);
      return;
    }
    const ordered = lockOrdered(batch);
    let results: RecordedMessage[];
    try {
      results = await recordInboundMessages(
        sql,
        ordered.map((w) => w.p),
      );
    } catch (err) {
      if (!rowCaused(err)) {
        for (const w of ordered) w.reject(err);
        return;
      }
      // Nothing of this batch was recorded. Row by row, in the same order, so a row that cannot
      // be recorded fails its own webhook only. A tenant whose row waited out the lock bound has
      // its later rows failed with it, unsent: each would wait the bound again.
      counts.fallbacks++;
      const stuck = new Map<string, unknown>();
      for (const w of ordered) {
        if (stuck.has(w.p.tenantId)) {
          w.reject(stuck.get(w.p.tenantId));
          continue;
        }
        await recordInboundMessage(sql, w.p).then(w.resolve, (e: unknown) => {
          if (isLockTimeout(e)) stuck.set(w.p.tenantId, e);
          w.reject(e);
        });
      }
      return;
    }
    for (const [i, w] of ordered.entries()) w.resolve(results[i]!);
  };

  return {
    record(p) {
      return new Promise<RecordedMessage>((resolve, reject) => {
        queue.push({ p, key: sessionKey(p), resolve, reject });
        pump();
      });
    },
    stats: () => ({ ...counts }),
  };
}

const sessionKey = (p: RecordMessageParams) =>
  `${p.tenantId}\u0000${p.bindingId}\u0000${sessionIdentityKey(p.identity)}`;

/**
 * The order locks are taken in: each tenant's rate-limit window, then its sessions. Every row of a
 * tenant gets the rate limit of the tenant's last-arrived row, so either all of them take the
 * window first or none does (rows of one tenant read a limit that changed moments ago otherwise
 * disagree, and a row without one would take its session before a later row takes the window).
 */
function lockOrdered(batch: Waiting[]): Waiting[] {
  const limitOf = new Map<string, number | null>();
  for (const w of batch) limitOf.set(w.p.tenantId, w.p.rateLimitRpm);
  return batch
    .map((w) => {
      const rpm = limitOf.get(w.p.tenantId) ?? null;
      return rpm === w.p.rateLimitRpm ? w : { ...w, p: { ...w.p, rateLimitRpm: rpm } };
    })
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)); // Array#sort is stable
}

/**
 * An error one row can cause: bad data (22), a constraint (23), the function's own (P0), a
 * deadlock or serialization failure (40), a lock one row waited for too long (55P03: one tenant's
 * window or one chat's session held elsewhere must not fail the other tenants' webhooks). Anything
 * else (a lost connection, the server going away, a permission) would fail every row alike.
 */
function rowCaused(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return isLockTimeout(err) || (typeof code === 'string' && /^(22|23|P0|40)/.test(code));
}
