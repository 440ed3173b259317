// Shared helpers for the in-process fake third-party servers (test fixtures only).
// No vitest imports here: the fakes are also used by the demo script.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A fault injected into one request. */
export type Fault =
  /** answer with this HTTP status and a protocol-shaped error body; the effect is NOT applied */
  | { kind: 'status'; status: number }
  /** answer with the service's rate-limit response; the effect is NOT applied */
  | { kind: 'rate_limit'; retryAfterSeconds: number }
  /** hold the request open for `ms` (or until the server closes), then drop the socket; NOT applied */
  | { kind: 'timeout'; ms: number }
  /** apply the effect, then destroy the socket without answering */
  | { kind: 'apply_then_drop' }
  /** apply the effect immediately, answer normally after `ms` */
  | { kind: 'delay'; ms: number }
  /** hold the request for `ms` before it is applied (slow on the way in), then apply and answer */
  | { kind: 'late'; ms: number }
  /** apply the effect immediately, answer normally once `until()` settles (e.g. a dependency stopped) */
  | { kind: 'hold_until'; until: () => Promise<unknown> };

export type FaultKind = Fault['kind'];

/** Per-request hook: return a fault to inject or undefined for normal handling. */
export type FaultPlan<R> = (req: R) => Fault | undefined;

export interface RandomFaultOptions {
  /** probability in [0, 1] that an eligible request gets a fault */
  rate: number;
  /** the fault to inject (or a list to pick from uniformly) */
  fault: Fault | Fault[];
  /** PRNG seed, so runs are reproducible (default 1) */
  seed?: number;
}

/** Small seeded PRNG (mulberry32) returning floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Fault selection shared by all fakes. Order: the `queue` (FIFO, only for eligible requests),
 * then the plan hook (sees every request), then random failures (eligible requests only).
 */
export class FaultInjector<R> {
  readonly queue: Fault[] = [];
  injected = 0;
  readonly injectedByKind: Record<FaultKind, number> = {
    status: 0,
    rate_limit: 0,
    timeout: 0,
    apply_then_drop: 0,
    delay: 0,
    late: 0,
    hold_until: 0,
  };
  private plan: FaultPlan<R> | undefined;
  private random: { rate: number; faults: Fault[]; rng: () => number } | undefined;

  setPlan(plan: FaultPlan<R> | undefined): void {
    this.plan = plan;
  }

  failRandomly(opts: RandomFaultOptions | undefined): void {
    if (!opts) {
      this.random = undefined;
      return;
    }
    const faults = Array.isArray(opts.fault) ? opts.fault : [opts.fault];
    this.random = { rate: opts.rate, faults, rng: seededRandom(opts.seed ?? 1) };
  }

  clear(): void {
    this.queue.length = 0;
    this.plan = undefined;
    this.random = undefined;
  }

  /** Decide the fault for one request (and count it). */
  next(req: R, eligible: boolean): Fault | undefined {
    let fault: Fault | undefined;
    if (eligible && this.queue.length > 0) fault = this.queue.shift();
    if (!fault && this.plan) fault = this.plan(req);
    if (!fault && eligible && this.random) {
      const { rng, rate, faults } = this.random;
      if (rng() < rate) fault = faults[Math.floor(rng() * faults.length)];
    }
    if (fault) {
      this.injected++;
      this.injectedByKind[fault.kind]++;
    }
    return fault;
  }
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

export interface RunningServer {
  url: string;
  port: number;
  readonly closed: boolean;
  /** resolves after `ms`, or as soon as the server closes */
  hold(ms: number): Promise<void>;
  /** stops listening, destroys every open socket, releases held requests */
  close(): Promise<void>;
}

export async function startServer(handler: Handler, host = '127.0.0.1'): Promise<RunningServer> {
  const sockets = new Set<Socket>();
  const holds = new Set<() => void>();
  let closed = false;
  const server = createServer((req, res) => {
    Promise.resolve()
      .then(() => handler(req, res))
      .catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) {
          sendJson(res, 500, { error: `fake server error: ${String(err)}` });
        }
      });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    get closed() {
      return closed;
    },
    hold(ms) {
      if (closed) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          holds.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        holds.add(done);
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const release of [...holds]) release();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await stopped;
    },
  };
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses a JSON or x-www-form-urlencoded body; returns undefined when unparseable. */
export function parseBody(req: IncomingMessage, raw: string): Record<string, unknown> | undefined {
  if (raw === '') return {};
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  if (type.includes('application/x-www-form-urlencoded')) {
    return Object.fromEntries(new URLSearchParams(raw));
  }
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.destroyed || res.socket?.destroyed || res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Destroys the connection without sending any response. */
export function drop(res: ServerResponse): void {
  res.socket?.destroy();
}

/** A response a fake wants to send. */
export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** Base shape of a recorded request (every fake extends it). */
export interface RecordedRequest {
  at: number;
  method: string;
  path: string;
  /** logical endpoint name, e.g. 'sendMessage', 'message/send', 'tool', 'chat.completions' */
  endpoint: string;
  body: Record<string, unknown> | undefined;
  headers: IncomingMessage['headers'];
  /** kind of fault injected into this request, if any */
  fault?: FaultKind;
  /** HTTP status answered; undefined when the socket was dropped / still pending */
  status?: number;
}

/**
 * Runs one request through the fault model: status/rate_limit answer `onFault(...)` without applying;
 * timeout holds then drops without applying; apply_then_drop applies then drops; delay and
 * hold_until apply then answer late; late holds, then applies and answers. Records the answered status on `rec`.
 */
export async function answer(
  srv: RunningServer,
  res: ServerResponse,
  rec: RecordedRequest,
  fault: Fault | undefined,
  onFault: (fault: Extract<Fault, { kind: 'status' | 'rate_limit' }>) => Reply,
  apply: () => Reply,
): Promise<void> {
  rec.fault = fault?.kind;
  if (fault?.kind === 'status' || fault?.kind === 'rate_limit') {
    const r = onFault(fault);
    rec.status = r.status;
    sendJson(res, r.status, r.body, r.headers);
    return;
  }
  if (fault?.kind === 'timeout') {
    await srv.hold(fault.ms);
    drop(res);
    return;
  }
  if (fault?.kind === 'late') await srv.hold(fault.ms);
  const reply = apply();
  if (fault?.kind === 'apply_then_drop') {
    drop(res);
    return;
  }
  if (fault?.kind === 'delay') await srv.hold(fault.ms);
  // Answered even when `until` fails: its caller sees that failure where it awaits it.
  if (fault?.kind === 'hold_until') await fault.until().catch(() => undefined);
  rec.status = reply.status;
  sendJson(res, reply.status, reply.body, reply.headers);
}

/** Polls `count()` until it reaches `n`; rejects with a clear message after `timeoutMs`. */
export function waitForCount(count: () => number, n: number, timeoutMs: number, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      const have = count();
      if (have >= n) return resolve();
      if (Date.now() - started >= timeoutMs) {
        return reject(new Error(`timed out after ${timeoutMs}ms waiting for ${n} ${what} (have ${have})`));
      }
      setTimeout(tick, 10);
    };
    tick();
  });
}
