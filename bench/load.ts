import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';

/**
 * A small, bounded, closed-loop HTTP load generator: exactly `connections` keep-alive sockets
 * (one agent with one socket per connection), each sending its next request as soon as the
 * previous answer has been read, until the duration is over. Every request has a timeout, so a
 * run never takes longer than `durationMs + requestTimeoutMs`. Dependency-free (node:http).
 * runOpenLoop is its open-loop counterpart: a fixed offered rate instead of a fixed concurrency.
 */

export interface LoadRequest {
  method?: 'POST' | 'GET';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface LoadOptions {
  /** Base URL, e.g. http://127.0.0.1:3000 (http only). */
  url: string;
  connections: number;
  durationMs: number;
  /** Builds request number `index` (0-based within this run); called just before it is sent. */
  makeRequest: (index: number) => LoadRequest;
  /** Status that counts as success; any other status (or a socket error / timeout) is an error. Default: 2xx. */
  /** the status (or any of the statuses) that counts as a success; default 2xx */
  expectStatus?: number | readonly number[];
  /** Per-request timeout (default 10 s); a request still open then is destroyed and counted as an error. */
  requestTimeoutMs?: number;
}

export interface LoadResult {
  connections: number;
  durationMs: number;
  /** Wall time from the first request to the last answer. */
  elapsedMs: number;
  sent: number;
  ok: number;
  errors: number;
  /** Status code (or error code such as ECONNRESET / timeout) → count, for everything that was not ok. */
  errorKinds: Record<string, number>;
  /** Successful responses per second over elapsedMs. */
  rps: number;
  /** Latency (ms, send → last body byte) of successful responses only. */
  latencies: Float64Array;
}

export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const target = new URL(opts.url);
  if (target.protocol !== 'http:') throw new Error('runLoad supports http:// only');
  const timeoutMs = opts.requestTimeoutMs ?? 10_000;
  const isOk = (status: number) => expected(opts.expectStatus, status);

  const agents = Array.from(
    { length: opts.connections },
    () => new Agent({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 }),
  );
  const samples: number[] = [];
  const errorKinds: Record<string, number> = {};
  let sent = 0;
  let ok = 0;
  let next = 0;

  const start = performance.now();
  const endAt = start + opts.durationMs;

  const worker = async (agent: Agent) => {
    while (performance.now() < endAt) {
      const r = opts.makeRequest(next++);
      sent++;
      const t0 = performance.now();
      try {
        const status = await send(target, agent, r, timeoutMs);
        if (isOk(status)) {
          ok++;
          samples.push(performance.now() - t0);
        } else {
          errorKinds[String(status)] = (errorKinds[String(status)] ?? 0) + 1;
        }
      } catch (err) {
        const kind = (err as NodeJS.ErrnoException).code ?? (err as Error).message ?? 'error';
        errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
      }
    }
  };

  try {
    await Promise.all(agents.map(worker));
  } finally {
    for (const a of agents) a.destroy();
  }
  const elapsedMs = performance.now() - start;
  return {
    connections: opts.connections,
    durationMs: opts.durationMs,
    elapsedMs,
    sent,
    ok,
    errors: sent - ok,
    errorKinds,
    rps: ok / (elapsedMs / 1000),
    latencies: Float64Array.from(samples),
  };
}

export interface OpenLoopOptions {
  /** Base URL, e.g. http://127.0.0.1:3000 (http only). */
  url: string;
  /** Offered load: request i is due at start + i / ratePerSecond, whatever the answers do. */
  ratePerSecond: number;
  durationMs: number;
  makeRequest: (index: number) => LoadRequest;
  /** the status (or any of the statuses) that counts as a success; default 2xx */
  expectStatus?: number | readonly number[];
  requestTimeoutMs?: number;
  /** Bound on requests in flight (default 1,000); a request due beyond it is not sent and counts as an error. */
  maxInFlight?: number;
}

export interface OpenLoopResult extends LoadResult {
  offeredRps: number;
  /** Most requests in flight at once (Little's law: rate × latency when the server keeps up). */
  peakInFlight: number;
  /** Largest delay of a send behind its schedule (the load generator's own lag). */
  maxSendLagMs: number;
}

/**
 * An open-loop (fixed-rate) HTTP load generator: requests are sent on a fixed schedule, not when a
 * previous answer arrives, so a slow answer does not slow the offered load down. Latency is measured
 * from each request's scheduled send time (no coordinated omission). Bounded: it schedules for
 * `durationMs`, never holds more than `maxInFlight` requests, and every request has a timeout.
 * Keep-alive sockets are reused and opened on demand (one per request in flight).
 */
export async function runOpenLoop(opts: OpenLoopOptions): Promise<OpenLoopResult> {
  const target = new URL(opts.url);
  if (target.protocol !== 'http:') throw new Error('runOpenLoop supports http:// only');
  if (!(opts.ratePerSecond > 0)) throw new Error('runOpenLoop needs a positive rate');
  const timeoutMs = opts.requestTimeoutMs ?? 10_000;
  const maxInFlight = opts.maxInFlight ?? 1_000;
  const isOk = (status: number) => expected(opts.expectStatus, status);
  const agent = new Agent({ keepAlive: true, maxSockets: maxInFlight, maxFreeSockets: maxInFlight });
  const samples: number[] = [];
  const errorKinds: Record<string, number> = {};
  const count = (kind: string) => {
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
  };
  const pending = new Set<Promise<void>>();
  let sent = 0;
  let ok = 0;
  let peakInFlight = 0;
  let maxSendLagMs = 0;
  const total = Math.floor((opts.durationMs / 1000) * opts.ratePerSecond);
  const intervalMs = 1000 / opts.ratePerSecond;

  const start = performance.now();
  const fire = (index: number, dueAt: number) => {
    sent++;
    if (pending.size >= maxInFlight) {
      count('over maxInFlight');
      return;
    }
    maxSendLagMs = Math.max(maxSendLagMs, performance.now() - dueAt);
    const p = send(target, agent, opts.makeRequest(index), timeoutMs)
      .then((status) => {
        if (isOk(status)) {
          ok++;
          samples.push(performance.now() - dueAt);
        } else {
          count(String(status));
        }
      })
      .catch((err: unknown) =>
        count((err as NodeJS.ErrnoException).code ?? (err as Error).message ?? 'error'),
      )
      .finally(() => pending.delete(p));
    pending.add(p);
    peakInFlight = Math.max(peakInFlight, pending.size);
  };

  try {
    // At most `total` iterations of sending; each wait is until the next request is due.
    let next = 0;
    while (next < total) {
      const now = performance.now();
      while (next < total && start + next * intervalMs <= now) {
        fire(next, start + next * intervalMs);
        next++;
      }
      if (next < total) {
        const wait = start + next * intervalMs - performance.now();
        await new Promise((r) => setTimeout(r, Math.max(0, wait)));
      }
    }
    await Promise.all(pending);
  } finally {
    agent.destroy();
  }
  const elapsedMs = performance.now() - start;
  return {
    connections: peakInFlight,
    durationMs: opts.durationMs,
    elapsedMs,
    sent,
    ok,
    errors: sent - ok,
    errorKinds,
    rps: ok / (elapsedMs / 1000),
    latencies: Float64Array.from(samples),
    offeredRps: opts.ratePerSecond,
    peakInFlight,
    maxSendLagMs,
  };
}

function send(target: URL, agent: Agent, r: LoadRequest, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...r.headers };
    if (r.body !== undefined) headers['content-length'] = Buffer.byteLength(r.body);
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path: r.path,
        method: r.method ?? 'POST',
        agent,
        headers,
      },
      (res) => {
        res.on('error', reject);
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.resume();
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })));
    req.on('error', reject);
    req.end(r.body);
  });
}

/**
 * The same closed loop for any async operation (no HTTP): `concurrency` loops, each starting its
 * next task when the previous one settles, until the duration is over. A task that rejects or
 * takes longer than `taskTimeoutMs` (default 10 s; it is then abandoned) counts as an error.
 */
export async function runTasks(opts: {
  concurrency: number;
  durationMs: number;
  task: (index: number) => Promise<void>;
  taskTimeoutMs?: number;
}): Promise<LoadResult> {
  const timeoutMs = opts.taskTimeoutMs ?? 10_000;
  const samples: number[] = [];
  const errorKinds: Record<string, number> = {};
  let sent = 0;
  let ok = 0;
  let next = 0;
  const start = performance.now();
  const endAt = start + opts.durationMs;
  const loop = async () => {
    while (performance.now() < endAt) {
      sent++;
      const t0 = performance.now();
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          opts.task(next++),
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(Object.assign(new Error('timeout'), { code: 'timeout' })),
              timeoutMs,
            );
          }),
        ]);
        ok++;
        samples.push(performance.now() - t0);
      } catch (err) {
        const kind = (err as NodeJS.ErrnoException).code ?? (err as Error).name ?? 'error';
        errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
      } finally {
        clearTimeout(timer);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, loop));
  const elapsedMs = performance.now() - start;
  return {
    connections: opts.concurrency,
    durationMs: opts.durationMs,
    elapsedMs,
    sent,
    ok,
    errors: sent - ok,
    errorKinds,
    rps: ok / (elapsedMs / 1000),
    latencies: Float64Array.from(samples),
  };
}

/** Several runs as one: summed counts, pooled latency samples, throughput over the summed wall time. */
export function mergeResults(results: readonly LoadResult[]): LoadResult {
  if (results.length === 0) throw new Error('nothing to merge');
  const errorKinds: Record<string, number> = {};
  for (const r of results) {
    for (const [k, v] of Object.entries(r.errorKinds)) errorKinds[k] = (errorKinds[k] ?? 0) + v;
  }
  const total = results.reduce((n, r) => n + r.latencies.length, 0);
  const latencies = new Float64Array(total);
  let at = 0;
  for (const r of results) {
    latencies.set(r.latencies, at);
    at += r.latencies.length;
  }
  const elapsedMs = results.reduce((n, r) => n + r.elapsedMs, 0);
  const ok = results.reduce((n, r) => n + r.ok, 0);
  const sent = results.reduce((n, r) => n + r.sent, 0);
  return {
    connections: results[0]!.connections,
    durationMs: results.reduce((n, r) => n + r.durationMs, 0),
    elapsedMs,
    sent,
    ok,
    errors: sent - ok,
    errorKinds,
    rps: ok / (elapsedMs / 1000),
    latencies,
  };
}

/** Nearest-rank percentiles of the successful responses' latencies (NaN when there are none). */
export function summarize(latencies: Float64Array): LatencySummary {
  const sorted = Float64Array.from(latencies).sort();
  const n = sorted.length;
  const rank = (q: number) =>
    n === 0 ? Number.NaN : sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!;
  const mean = n === 0 ? Number.NaN : sorted.reduce((s, v) => s + v, 0) / n;
  return {
    count: n,
    mean,
    p50: rank(0.5),
    p90: rank(0.9),
    p99: rank(0.99),
    max: n === 0 ? Number.NaN : sorted[n - 1]!,
  };
}

function expected(want: number | readonly number[] | undefined, status: number): boolean {
  if (want === undefined) return status >= 200 && status < 300;
  return typeof want === 'number' ? status === want : want.includes(status);
}
