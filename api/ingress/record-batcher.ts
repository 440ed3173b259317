import type { Sql } from 'postgres';
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
// time; a webhook that arrives while they are all busy waits for the next one, which carries every
// webhook that queued meanwhile (up to MAX_BATCH) in one statement. Nothing waits for a timer: an
// idle API sends each record at once, alone, exactly as before; batches form only under load, and a
// webhook waits at most for one statement ahead of it.
//
// Order and locks: a batch is sorted by (tenant, binding, session identity), stably, so the
// messages of one session keep their arrival order (event_seq is still allocated in commit order)
// and concurrent batches take the rate-limit window and session rows in one global order — they
// queue behind each other, never deadlock. A batch that fails for any reason (an error is all or
// nothing: the statement is one transaction) is recorded again row by row, so each webhook gets
// its own result or its own error.

/**
 * Record statements running at once (SWITCHYARD_INGRESS_RECORD_CONCURRENCY): two, so one batch is
 * being built and sent while the other commits. bench:ingress on 2 cores: 4 in flight gave 0.80×
 * the bare one-insert handler, 2 gave 0.94–1.00× (bigger batches, PostgreSQL's CPU per webhook
 * 444 → 300 µs); more only helps a database with the cores to run them side by side.
 */
const MAX_IN_FLIGHT = 2;
/** Rows in one statement (a bound on its size and on the time one batch holds its locks). */
const MAX_BATCH = 64;

export interface RecordBatcher {
  record(p: RecordMessageParams): Promise<RecordedMessage>;
  /** What it has done so far: statements sent and rows in them (tests, benchmarks). */
  stats(): { statements: number; rows: number; fallbacks: number; largest: number };
}

interface Waiting {
  p: RecordMessageParams;
  resolve: (r: RecordedMessage) => void;
  reject: (err: unknown) => void;
}

export function createRecordBatcher(
  sql: Sql,
  opts: { maxInFlight?: number; maxBatch?: number } = {},
): RecordBatcher {
  const maxInFlight = opts.maxInFlight ?? MAX_IN_FLIGHT;
  const maxBatch = opts.maxBatch ?? MAX_BATCH;
  const queue: Waiting[] = [];
  let inFlight = 0;
  const counts = { statements: 0, rows: 0, fallbacks: 0, largest: 0 };

  const pump = () => {
    while (inFlight < maxInFlight && queue.length > 0) {
      const batch = queue.splice(0, maxBatch);
      inFlight++;
      void send(batch).finally(() => {
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
    const ordered = [...batch].sort((a, b) => compareLockOrder(a.p, b.p)); // Array#sort is stable
    let results: RecordedMessage[];
    try {
      results = await recordInboundMessages(
        sql,
        ordered.map((w) => w.p),
      );
    } catch {
      // All or nothing: nothing of this batch was recorded. Row by row, in the same order, so a
      // row that cannot be recorded fails its own webhook only.
      counts.fallbacks++;
      for (const w of ordered) await recordInboundMessage(sql, w.p).then(w.resolve, w.reject);
      return;
    }
    for (const [i, w] of ordered.entries()) w.resolve(results[i]!);
  };

  return {
    record(p) {
      return new Promise<RecordedMessage>((resolve, reject) => {
        queue.push({ p, resolve, reject });
        pump();
      });
    },
    stats: () => ({ ...counts }),
  };
}

/** The order locks are taken in: the tenant's rate-limit window, then its sessions. */
function compareLockOrder(a: RecordMessageParams, b: RecordMessageParams): number {
  return (
    cmp(a.tenantId, b.tenantId) ||
    cmp(a.bindingId, b.bindingId) ||
    cmp(sessionIdentityKey(a.identity), sessionIdentityKey(b.identity))
  );
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
