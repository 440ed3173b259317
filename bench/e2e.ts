// End-to-end benchmark: Switchyard's messageWorkflow against a bare Temporal workflow doing the
// same Bot API calls, alternating on one Temporal dev server and one machine.
//
//   npm run bench:e2e            (env: BENCH_ROUNDS=3 BENCH_MESSAGES=200 BENCH_MESSAGES_THREE=60
//                                 BENCH_CONCURRENCY=20;
//                                 BENCH_VARIANTS=one|three; BENCH_ANALYZE=0; BENCH_PROBE_MESSAGES=20;
//                                 diagnostics below)
//
// Brings up its own embedded PostgreSQL (temp dir, migrated), a Temporal dev server from the
// installed CLI (temporal-dev.sh path), and a fake Telegram Bot API on 127.0.0.1, then runs, per
// round, for a one-segment and a three-segment reply, (a) ours: a Telegram update posted to the
// real webhook route through app.request (ingress records the message and starts messageWorkflow;
// scripted model) and (b) bare: the same update posted the same way to a webhook that only parses
// it and starts bench/bare-workflow.ts (bench/bare-webhook.ts), one activity per segment doing the
// same sendMessage call; for three segments also (c) bare-paced: the same with the per-chat
// interval our delivery keeps (Telegram: ~1 message/s per chat) as a timer between sends, the
// baseline for that variant; for one segment also (d) bare-direct: the bare workflow started by
// the bench, no webhook (reference). Every message goes to its own chat, so pacing never delays
// one message behind another's. Exits by itself.

import { appendFileSync, chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import postgres, { type Sql } from 'postgres';
import { Registry } from 'prom-client';
import { createActivities } from '../activities';
import { CHAT_INTERVALS_MS } from '../activities/delivery';
import type { ActivityDeps } from '../activities/deps';
import { newApp } from '../api/app';
import { idempotencyKeyOf } from '../api/ingress/record';
import { CHANNEL_LIMITS, segmentText } from '../channels/segment';
import { startEmbeddedPostgres } from '../db/embedded';
import { runMigrations } from '../db/migrate';
import { auditKeyFrom } from '../lib/audit-key';
import { createLogger } from '../lib/log';
import { createSecretBox } from '../lib/secret-box';
import { startRegistry } from '../registry';
import { startAuditSealer } from '../runtime/audit-sealer';
import { workflowsPath } from '../runtime/worker';
import { type FakeTelegram, startFakeTelegram } from '../tests/fakes/telegram';
import { seedTelegramTenant, telegramTextUpdate } from '../tests/helpers/seed';
import { messageWorkflowId } from '../workflows/shared';
import { bareActivities } from './bare-activities';
import { createBareWebhookApp } from './bare-webhook';
import type { bareWorkflow } from './bare-workflow';
import { benchTemporal, temporalModeFromArgs } from './temporal';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/**
 * Messages per side and round. A round ramps up and down around its steady state (the first and
 * last CONCURRENCY messages overlap fewer others), so a round must be long against that: with 50
 * one-segment messages at concurrency 20 the ramps are most of the round and the figures swing
 * ±15% between rounds. A three-segment message takes ≥ 2.2 s by design, so fewer of them do.
 */
const MESSAGES: Record<'one' | 'three', number> = {
  one: Number(process.env.BENCH_MESSAGES ?? 200),
  three: Number(process.env.BENCH_MESSAGES_THREE ?? 60),
};
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 20);
/**
 * Warm-up messages per side and variant, not measured: enough for CONCURRENCY lanes to fill every
 * connection of the pool (a new PostgreSQL backend compiles each PL/pgSQL function and plan on
 * first use) and the workers' caches.
 */
const WARMUP: Record<'one' | 'three', number> = { one: 3 * CONCURRENCY, three: CONCURRENCY };
/**
 * Diagnostics, off by default (they cost time on our side): BENCH_PG_FUNCTIONS=1 prints where
 * PostgreSQL spent its time, by SQL function and by statement inside them; BENCH_PG_LOG=<file>
 * writes every statement's plan (auto_explain, nested statements and triggers included) to a file.
 */
const PG_FUNCTIONS = process.env.BENCH_PG_FUNCTIONS === '1';
const PG_LOG = process.env.BENCH_PG_LOG;

function pgDiagnostics(): { settings?: Record<string, string>; onLog?: (line: string) => void } {
  const settings: Record<string, string> = {};
  if (PG_FUNCTIONS)
    Object.assign(settings, {
      shared_preload_libraries: 'pg_stat_statements',
      'pg_stat_statements.track': 'all',
      track_functions: 'all',
    });
  if (PG_LOG)
    Object.assign(settings, {
      session_preload_libraries: 'auto_explain',
      'auto_explain.log_min_duration': '0',
      'auto_explain.log_nested_statements': 'on',
      'auto_explain.log_analyze': 'on',
      'auto_explain.log_triggers': 'on',
    });
  return {
    settings,
    ...(PG_LOG ? { onLog: (line: string) => appendFileSync(PG_LOG, `${line}\n`) } : {}),
  };
}
/**
 * Messages in the statement probe. Its PostgreSQL CPU by component comes from /proc in 10 ms ticks,
 * so 20 messages resolve 0.5 ms per message nominally; BENCH_PROBE_MESSAGES=400 BENCH_ROUNDS=0
 * BENCH_VARIANTS=one (no timed round: the report's throughputs read NaN; ~40 s) 0.025 ms, though
 * runs of one tree still differ by up to ~20% (other processes share the 2 cores): compare several.
 */
const PROBE_MESSAGES = Number(process.env.BENCH_PROBE_MESSAGES ?? 20);
const UNLOADED_MESSAGES = 20;
const DEADLINE_MS = 12 * 60_000;
const HISTORY_SAMPLES = 3;
const OURS_QUEUE = 'bench-ours';
const BARE_QUEUE = 'bench-bare';

// Targets of the issues: #5 (three segments against the paced bare workflow, history), #14 (one
// segment at least as fast as the bare workflow, and the figures it keeps: 7 history events and 5
// round trips or fewer for a scripted one-segment message).
const TARGET_THROUGHPUT_RATIO: Record<'one' | 'three', number> = { one: 1.0, three: 0.9 };
const TARGET_HISTORY_EXTRA = 2;
const TARGET_HISTORY_ONE_SEGMENT = 7;
const TARGET_DB_ROUND_TRIPS_ONE_SEGMENT = 5;
/** All messages in one tenant against the same spread over TENANTS tenants (issue #14: the audit chain). */
const TARGET_ONE_TENANT_RATIO = 0.95;
const TENANTS = 10;

Runtime.install({ logger: new DefaultLogger('ERROR') });
/** Stops PostgreSQL, Temporal and the fakes; set once they run, so an abort leaves nothing behind. */
let cleanupNow: (() => Promise<void>) | null = null;
let aborting = false;
const abort = (why: string, code: number) => {
  // A second signal (tsx forwards the one the shell already sent) must not cut the cleanup short.
  if (aborting) return;
  aborting = true;
  console.error(`bench: ${why}; cleaning up`);
  void (cleanupNow?.() ?? Promise.resolve()).finally(() => process.exit(code));
};
const watchdog = setTimeout(
  () => abort(`still running after ${DEADLINE_MS / 60_000} minutes`, 2),
  DEADLINE_MS,
);
watchdog.unref();
process.on('SIGINT', () => abort('interrupted', 130));
process.on('SIGTERM', () => abort('terminated', 143));

const PARAGRAPH = 'This paragraph is long enough that three of them need three Telegram messages. ';
const part = (n: number) => `Part ${n}. ${PARAGRAPH.repeat(40)}`;
const SCRIPTED = {
  rules: [
    { match: '^one\\b', reply: 'One-segment reply to: {{text}}' },
    { match: '^three\\b', reply: `${part(1)}\n\n${part(2)}\n\n${part(3)}` },
  ],
  default_reply: '?',
};
type Variant = 'one' | 'three';
/** BENCH_VARIANTS=one (or three): run only that reply size (diagnostics; the targets need both). */
const VARIANTS: Variant[] = (['one', 'three'] as const).filter((v) =>
  (process.env.BENCH_VARIANTS ?? 'one,three').split(',').includes(v),
);
/**
 * Every bare side gets the same Telegram update as ours, posted the same way (app.request), on a
 * webhook that only parses it and starts the bare workflow (bench/bare-webhook.ts): end to end
 * means from the webhook to the reply for both. bare: no pacing; the 1-segment baseline.
 * bare-paced: the bare workflow waiting (a durable timer) between two segments what our delivery
 * paces a private chat (Telegram allows ~1 message/s per chat); the 3-segment baseline (bare
 * unpaced is shown for reference: a real bot could not send that fast). bare-direct: the bare
 * workflow started by the bench itself, no webhook at all (reference: the workflow alone).
 */
type Side = 'ours' | 'ours-10t' | 'bare' | 'bare-paced' | 'bare-direct';
/**
 * ours: every message in one tenant (the case whose finishes used to serialize on the tenant's
 * audit chain); ours-10t: the same messages spread round-robin over TENANTS tenants (reference for
 * the one-tenant target).
 */
const SIDES: Record<Variant, Side[]> = {
  one: ['ours', 'ours-10t', 'bare', 'bare-direct'],
  three: ['ours', 'bare-paced', 'bare'],
};
/** The baseline a variant's targets are judged against. */
const BASELINE: Record<Variant, Side> = { one: 'bare', three: 'bare-paced' };

/** The segments our commitReply materializes for a reply (the bare workflow gets the same). */
const segmentCache = new Map<string, string[]>();
function segmentsOf(reply: string): string[] {
  // Memoized: the bench's own segmentation must not take CPU from either side.
  let segments = segmentCache.get(reply);
  if (!segments) {
    segments = segmentText(reply, CHANNEL_LIMITS.telegram).filter((p) => p.trim() !== '');
    if (segmentCache.size < 1000) segmentCache.set(reply, segments);
  }
  return segments;
}
const replyOf = (variant: Variant, text: string) =>
  variant === 'one' ? `One-segment reply to: ${text}` : `${part(1)}\n\n${part(2)}\n\n${part(3)}`;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Counts statements sent to PostgreSQL (each one a round trip, incl. begin/commit), by label. */
class QueryCounter {
  readonly byLabel = new Map<string, number>();
  add(label: string) {
    this.byLabel.set(label, (this.byLabel.get(label) ?? 0) + 1);
  }
  snapshot(): Map<string, number> {
    return new Map(this.byLabel);
  }
  static delta(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
    const out = new Map<string, number>();
    for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0) out.set(k, v - (before.get(k) ?? 0));
    return out;
  }
}

const ARRAY_TYPES_QUERY = /^\s*select b\.oid, b\.typarray\b/;

/** A statement's short name: the SQL function it calls, else its first words. */
function statementName(query: string): string {
  const fn = /\b(?:from|select)\s+(?:public\.)?([a-z_]+)\s*\(/i.exec(query)?.[1];
  return fn ?? query.trim().split(/\s+/).slice(0, 3).join(' ').toLowerCase();
}

/**
 * A client with createSql's options (db/client.ts), optionally with a `debug` hook that counts
 * statements. Counting is not free (postgres.js then captures a stack trace per statement), so the
 * timed rounds run on clients without it and the statements are counted in a separate probe.
 */
const BENCH_MASTER_KEY = Buffer.alloc(32, 9).toString('base64');
const BENCH_AUDIT_KEY = auditKeyFrom(BENCH_MASTER_KEY);

function benchSql(
  url: string,
  max: number,
  label: string,
  count?: { counter: QueryCounter; label: string },
): Sql {
  return postgres(url, {
    max,
    // Names the backends, so PostgreSQL's CPU can be told by component (pgCpuByComponent).
    // (ASCII only: PostgreSQL shows other characters of an application_name as escapes.)
    connection: {
      application_name: label.replaceAll('→', '->').slice(0, 63),
      'app.audit_key': BENCH_AUDIT_KEY,
    } as Record<string, string>,
    // Connections stay open between rounds (an idle pool would reconnect in the next round).
    idle_timeout: 0,
    connect_timeout: 10,
    onnotice: () => undefined,
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
    transform: { undefined: null },
    ...(count
      ? {
          debug: (_conn, query) => {
            // postgres.js reads the array types once per new connection: set-up, not per message.
            if (!ARRAY_TYPES_QUERY.test(query)) count.counter.add(`${count.label}: ${statementName(query)}`);
          },
        }
      : {}),
  });
}

/** Resolves when a chat has received `need` messages at the fake, with the last one's arrival time. */
class Arrivals {
  private next = 0;
  private readonly counts = new Map<string, { n: number; last: number }>();
  private readonly waiters = new Map<string, { need: number; resolve: (at: number) => void }>();
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly fake: FakeTelegram) {
    this.timer = setInterval(() => this.poll(), 2);
  }
  private poll() {
    while (this.next < this.fake.sent.length) {
      const s = this.fake.sent[this.next++]!;
      const chat = String(s.chatId);
      const c = this.counts.get(chat) ?? { n: 0, last: 0 };
      c.n++;
      c.last = s.at;
      this.counts.set(chat, c);
      const w = this.waiters.get(chat);
      if (w && c.n >= w.need) {
        this.waiters.delete(chat);
        w.resolve(c.last);
      }
    }
  }
  wait(chat: string, need: number, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(chat);
        reject(new Error(`chat ${chat}: ${need} segments not received within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.set(chat, {
        need,
        resolve: (at) => {
          clearTimeout(timer);
          resolve(at);
        },
      });
    });
  }
  stop() {
    clearInterval(this.timer);
  }
}

/**
 * CPU time (ms) used so far by this process (app, worker, fakes, bench; all threads) and by its
 * descendant PostgreSQL and Temporal server processes, from /proc (Linux; zeros elsewhere).
 */
function cpuSnapshot(): { node: number; postgres: number; temporal: number; threads: Map<string, number> } {
  const u = process.cpuUsage();
  const out = { node: (u.user + u.system) / 1000, postgres: 0, temporal: 0, threads: threadCpu() };
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return out;
  }
  const stats = new Map<number, { ppid: number; comm: string; ms: number }>();
  for (const pid of entries) {
    try {
      const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = raw.slice(raw.indexOf('(') + 1, raw.lastIndexOf(')'));
      const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(pid), {
        ppid: Number(f[1]),
        comm,
        ms: ((Number(f[11]) + Number(f[12])) * 1000) / 100,
      });
    } catch {
      // exited meanwhile
    }
  }
  const ours = (pid: number): boolean => {
    for (let p = stats.get(pid)?.ppid, hops = 0; p && hops < 8; p = stats.get(p)?.ppid, hops++)
      if (p === process.pid) return true;
    return false;
  };
  for (const [pid, st] of stats) {
    if (!ours(pid)) continue;
    if (st.comm.startsWith('postgres')) out.postgres += st.ms;
    else if (st.comm.startsWith('temporal')) out.temporal += st.ms;
  }
  return out;
}

/** CPU time (ms) of this process's threads by thread name (Linux; empty elsewhere). */
function threadCpu(): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const raw = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const comm = raw.slice(raw.indexOf('(') + 1, raw.lastIndexOf(')'));
      const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
      const name = tid === String(process.pid) ? 'main' : comm;
      out.set(name, (out.get(name) ?? 0) + ((Number(f[11]) + Number(f[12])) * 1000) / 100);
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/**
 * CPU time (ms) of PostgreSQL backends by application_name (each component's pool names its
 * connections), from /proc. A backend that disconnected meanwhile is lost, so pools stay open.
 */
async function pgCpuByComponent(owner: Sql): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const rows = await owner<{ pid: number; name: string }[]>`
    select pid, application_name as name from pg_stat_activity where application_name <> ''`;
  for (const { pid, name } of rows) {
    try {
      const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
      out.set(name, (out.get(name) ?? 0) + ((Number(f[11]) + Number(f[12])) * 1000) / 100);
    } catch {
      // not on this machine's /proc, or exited
    }
  }
  return out;
}

interface RoundResult {
  cpu: { node: number; postgres: number; temporal: number };
  /** This process's CPU (ms) by thread name. */
  threads: Map<string, number>;
  /** PostgreSQL backends' CPU (ms) by the component whose connections they serve. */
  pgComponents: Map<string, number>;
  side: Side;
  variant: Variant;
  messages: number;
  elapsedMs: number;
  latencies: number[];
  queries: Map<string, number>;
  historyEvents: number[];
  historyBreakdown: Map<string, number> | null;
}

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

const sum = (xs: Iterable<number>) => {
  let n = 0;
  for (const x of xs) n += x;
  return n;
};

/** Event types of a workflow history, e.g. ActivityTaskScheduled → 2. */
function eventTypes(events: readonly object[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of events) {
    const key = Object.entries(e).find(([k, v]) => k.endsWith('EventAttributes') && v)?.[0] ?? 'unknown';
    const name = key.replace(/EventAttributes$/, '').replace(/^./, (c) => c.toUpperCase());
    out.set(name, (out.get(name) ?? 0) + 1);
  }
  return out;
}

async function main(): Promise<number> {
  const started = Date.now();
  const root = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));
  chmodSync(root, 0o755);
  const cleanups: (() => Promise<unknown>)[] = [];
  // Once, whoever asks first (the end of main, or an abort); later callers wait for the same run.
  let cleaning: Promise<void> | null = null;
  const cleanup = (): Promise<void> =>
    (cleaning ??= (async () => {
      for (const c of cleanups.reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
      rmSync(root, { recursive: true, force: true });
    })());
  cleanupNow = cleanup;
  try {
    console.log(
      `bench:e2e — ${cpus().length} cores, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' ',
        )}; ${ROUNDS} rounds × ${MESSAGES.one} one-segment / ${MESSAGES.three} three-segment messages per side, concurrency ${CONCURRENCY}`,
    );
    const db = await startEmbeddedPostgres({
      dataDir: join(root, 'pg'),
      port: await freePort(),
      ephemeral: true,
      ...pgDiagnostics(),
    });
    cleanups.push(() => db.stop());
    await runMigrations(db.url);
    if (PG_FUNCTIONS) {
      const su = postgres(db.url, { max: 1, onnotice: () => undefined });
      await su`create extension if not exists pg_stat_statements`;
      await su.end();
    }
    const temporal = await benchTemporal(temporalModeFromArgs(), root);
    const env = temporal.env;
    cleanups.push(() => temporal.stop());
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const arrivals = new Arrivals(fake);
    cleanups.push(async () => arrivals.stop());

    // Bench bookkeeping (seeding, reading workflow ids) goes through an uncounted owner client.
    const owner = postgres(db.url, { max: 2, onnotice: () => undefined });
    cleanups.push(() => owner.end({ timeout: 5 }));
    const secrets = createSecretBox(BENCH_MASTER_KEY);
    const tenant = await seedTelegramTenant(owner, secrets, { apiBaseUrl: fake.url, scripted: SCRIPTED });
    fake.addBot(tenant.botToken);
    // ours-10t: the first tenant and TENANTS - 1 more like it.
    const tenants = [tenant];
    while (tenants.length < TENANTS) {
      const t = await seedTelegramTenant(owner, secrets, { apiBaseUrl: fake.url, scripted: SCRIPTED });
      fake.addBot(t.botToken);
      tenants.push(t);
    }

    // Ours, as `npm start` runs it for the timed rounds: the API app (ingress) and the worker's
    // activities share one pool of 20 connections. The statement probe runs on a second set whose
    // ingress and activity types each have their own counting pool (named, so PostgreSQL's CPU is
    // told by component too); `counting` picks the set.
    const counter = new QueryCounter();
    let counting = false;
    const pools: Sql[] = [];
    const pool = (label: string, max: number, counted: boolean) => {
      const sql = benchSql(db.url, max, label, counted ? { counter, label } : undefined);
      pools.push(sql);
      return sql;
    };
    const shared = pool('switchyard', 20, false);
    const log = createLogger({ level: 'silent' });
    // Each app with its configuration registry and LISTEN session, as an API process runs
    // (runtime/services.ts): a warm registry answers the binding lookup without a statement.
    // The counted app's registry reads on the counted ingress pool, so a cold lookup is counted.
    const INGRESS = 'ingress (webhook → record → start)';
    const ingressPool = pool(INGRESS, 10, true);
    const registries = await Promise.all(
      [ingressPool, shared].map((sql) => startRegistry({ sql, ttlMs: 30_000, log })),
    );
    const appFor = (sql: Sql, registry: (typeof registries)[number]) =>
      newApp({
        sql,
        temporal: env.client,
        taskQueue: OURS_QUEUE,
        secrets,
        log,
        metrics: new Registry(),
        auditKey: BENCH_AUDIT_KEY,
        adminToken: 'bench-admin-token-0123456789abcdef',
        temporalUiUrl: 'http://127.0.0.1:8233',
        temporalNamespace: 'default',
        now: () => Date.now(),
        registry: registry.registry,
      });
    const apps = {
      counted: appFor(ingressPool, registries[0]!),
      plain: appFor(shared, registries[1]!),
    };
    const baseDeps: ActivityDeps = {
      sql: shared,
      secrets,
      log,
      suspendedReply: 'unavailable',
      workerId: 'bench',
      sendTimeoutMs: 5000,
    };
    const plainActivities = createActivities(baseDeps);
    const names = Object.keys(plainActivities) as (keyof typeof plainActivities)[];
    const activities: Record<string, unknown> = {};
    for (const name of names) {
      const counted = createActivities({ ...baseDeps, sql: pool(`activity ${name}`, 10, true) })[name];
      const plain = plainActivities[name];
      activities[name] = (...args: never[]) =>
        (counting ? (counted as (...a: never[]) => unknown) : (plain as (...a: never[]) => unknown))(...args);
    }
    cleanups.push(() => Promise.all(pools.map((p) => p.end({ timeout: 5 }))));
    // Run first (cleanups run in reverse): the LISTEN sessions end before their pools.
    cleanups.push(() => Promise.all(registries.map((r) => r.close())));
    // As the worker process runs it (runtime/services.ts): the runtime's audit entries are sealed
    // into their chains in the background, on the shared pool.
    const sealer = startAuditSealer({ sql: shared, log, everyMs: 200 });
    cleanups.push(() => sealer.close());

    console.log('bundling both workflow sets…');
    const oursWorker = await Worker.create({
      connection: env.nativeConnection,
      namespace: 'default',
      taskQueue: OURS_QUEUE,
      workflowsPath,
      activities,
      maxConcurrentActivityTaskExecutions: 50,
      shutdownGraceTime: '5 seconds',
    });
    const bareWorker = await Worker.create({
      connection: env.nativeConnection,
      namespace: 'default',
      taskQueue: BARE_QUEUE,
      workflowsPath: fileURLToPath(new URL('./bare-workflow.ts', import.meta.url)),
      activities: bareActivities({ apiBaseUrl: fake.url, botToken: tenant.botToken, timeoutMs: 5000 }),
      maxConcurrentActivityTaskExecutions: 50,
      shutdownGraceTime: '5 seconds',
    });
    const running = [oursWorker.run(), bareWorker.run()];
    cleanups.push(async () => {
      for (const w of [oursWorker, bareWorker]) if (w.getState() === 'RUNNING') w.shutdown();
      await Promise.allSettled(running);
    });

    const bareApp = createBareWebhookApp({
      temporal: env.client,
      taskQueue: BARE_QUEUE,
      plan: (text, paced) => ({
        segments: segmentsOf(replyOf(text.startsWith('three') ? 'three' : 'one', text)),
        intervalMs: paced ? CHAT_INTERVALS_MS['telegram/direct'] : 0,
      }),
    });

    let nextChat = 7_000_000;
    const expectedSegments = (variant: Variant) => segmentsOf(replyOf(variant, `${variant} x`));
    for (const v of VARIANTS)
      console.log(
        `  ${v}: ${expectedSegments(v).length} segment(s) of ${expectedSegments(v)
          .map((s) => s.length)
          .join(' + ')} chars`,
      );
    if (expectedSegments('three').length !== 3)
      throw new Error('the three-segment reply does not make 3 segments');

    /** One message end to end; resolves to its latency (request sent → last segment at the fake). */
    const runOne = async (side: Side, variant: Variant): Promise<{ latency: number; workflowId: string }> => {
      const chat = nextChat++;
      const text = `${variant} message for chat ${chat}`;
      const segments = segmentsOf(replyOf(variant, text));
      const arrived = arrivals.wait(String(chat), segments.length, 120_000);
      const t0 = Date.now();
      let workflowId: string;
      if (side === 'ours' || side === 'ours-10t') {
        const tenant = side === 'ours' ? tenants[0]! : tenants[chat % TENANTS]!;
        const update = telegramTextUpdate({ chatId: chat, text });
        const body = JSON.stringify(update);
        const res = await (counting ? apps.counted : apps.plain).request(
          `/v1/webhooks/telegram/${tenant.routeKey}`,
          {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              // As on the wire: Telegram's POST carries its length (the app's body limit checks it
              // instead of re-reading the stream).
              'content-length': String(Buffer.byteLength(body)),
              'x-telegram-bot-api-secret-token': tenant.webhookSecret,
            },
            body,
          },
        );
        if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
        // The id ingress gave the workflow, computed as ingress does (no query charged to either side).
        workflowId = messageWorkflowId(
          idempotencyKeyOf(
            { tenantId: tenant.tenantId, bindingId: tenant.bindingId, channel: 'telegram' },
            `${chat}:${update.message.message_id}`,
          ),
        );
      } else if (side !== 'bare-direct') {
        workflowId = `bare-${chat}`;
        const body = JSON.stringify(telegramTextUpdate({ chatId: chat, text }));
        const res = await bareApp.request(`/webhook/${side === 'bare-paced' ? 'paced' : 'unpaced'}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          body,
        });
        if (res.status !== 200) throw new Error(`bare webhook answered ${res.status}: ${await res.text()}`);
      } else {
        workflowId = `bare-${chat}`;
        await env.client.workflow.start<typeof bareWorkflow>('bareWorkflow', {
          taskQueue: BARE_QUEUE,
          workflowId,
          args: [
            {
              chatId: String(chat),
              segments,
              intervalMs: 0,
            },
          ],
        });
      }
      const at = await arrived;
      return { latency: at - t0, workflowId };
    };

    const runRound = async (side: Side, variant: Variant, messages: number): Promise<RoundResult> => {
      const before = counter.snapshot();
      const cpuBefore = cpuSnapshot();
      const pgBefore = await pgCpuByComponent(owner);
      const latencies: number[] = [];
      const workflowIds: string[] = [];
      let issued = 0;
      const t0 = Date.now();
      const lane = async () => {
        while (issued < messages) {
          issued++;
          const r = await runOne(side, variant);
          latencies.push(r.latency);
          workflowIds.push(r.workflowId);
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, messages) }, lane));
      // The round ends when its last workflow has completed, not at the last reply's arrival: the
      // work after a send (ours: the receipt, the message's finish and summary) counts for the
      // last messages too.
      await Promise.all(workflowIds.map((id) => env.client.workflow.getHandle(id).result()));
      const elapsedMs = Date.now() - t0;
      const queries = QueryCounter.delta(counter.snapshot(), before);
      const cpuAfter = cpuSnapshot();
      const pgAfter = await pgCpuByComponent(owner);
      const pgComponents = new Map<string, number>();
      for (const [name, ms] of pgAfter) {
        const d = ms - (pgBefore.get(name) ?? 0);
        if (d > 0) pgComponents.set(name, d);
      }
      const cpu = {
        node: cpuAfter.node - cpuBefore.node,
        postgres: cpuAfter.postgres - cpuBefore.postgres,
        temporal: cpuAfter.temporal - cpuBefore.temporal,
      };
      const threads = new Map<string, number>();
      for (const [name, ms] of cpuAfter.threads) {
        const d = ms - (cpuBefore.threads.get(name) ?? 0);
        if (d > 0) threads.set(name, d);
      }
      const historyEvents: number[] = [];
      let historyBreakdown: Map<string, number> | null = null;
      for (const id of workflowIds.slice(0, HISTORY_SAMPLES)) {
        const history = await env.client.workflow.getHandle(id).fetchHistory();
        const events = history.events ?? [];
        historyEvents.push(events.length);
        historyBreakdown ??= eventTypes(events);
      }
      return {
        side,
        variant,
        messages,
        elapsedMs,
        latencies,
        queries,
        historyEvents,
        historyBreakdown,
        cpu,
        threads,
        pgComponents,
      };
    };

    console.log(
      `warm-up: twice ${WARMUP.one} one-segment / ${WARMUP.three} three-segment messages per side (not measured)`,
    );
    for (const pass of [1, 2]) {
      for (const v of VARIANTS) for (const s of SIDES[v]) await runRound(s, v, WARMUP[v]);
      // Statistics, as autovacuum keeps them in a running deployment, then a second warm-up pass:
      // ANALYZE invalidates every cached plan, and each backend would otherwise re-plan its
      // statements (custom plans first) during the first measured round.
      if (pass === 1 && process.env.BENCH_ANALYZE !== '0') await owner`analyze`;
    }

    // Statement probe (not timed): the same messages on the counting clients, after a warm-up on
    // them (a statement's first use on a connection is described first, which the hook also sees).
    const probes = new Map<Variant, RoundResult>();
    counting = true;
    for (const v of VARIANTS) await runRound('ours', v, WARMUP[v]);
    for (const v of VARIANTS) probes.set(v, await runRound('ours', v, PROBE_MESSAGES));
    counting = false;
    console.log(`statement probe: ${PROBE_MESSAGES} messages per variant on counting clients (not timed)`);

    const results: RoundResult[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const variant of VARIANTS) {
        const order = round % 2 === 1 ? SIDES[variant] : [...SIDES[variant]].reverse();
        for (const side of order) {
          const r = await runRound(side, variant, MESSAGES[variant]);
          results.push(r);
          console.log(
            `  round ${round} ${variant.padEnd(5)} ${side}: ${((r.messages / r.elapsedMs) * 1000).toFixed(1)} msg/s, ` +
              `p50 ${percentile(r.latencies, 50)} ms, p99 ${percentile(r.latencies, 99)} ms`,
          );
        }
      }
    }

    // Unloaded: one message at a time, so latency is the path itself, not queueing for the CPUs.
    // After the timed rounds: its minutes of near-idle (autovacuum runs, caches cool down) would
    // otherwise fall on the first measured round.
    const unloaded = new Map<string, number[]>();
    for (const v of VARIANTS)
      for (const side of SIDES[v]) {
        const latencies: number[] = [];
        for (let i = 0; i < UNLOADED_MESSAGES; i++) latencies.push((await runOne(side, v)).latency);
        unloaded.set(`${side}/${v}`, latencies);
      }

    report(results, probes, unloaded);
    if (PG_FUNCTIONS) {
      const rows = await owner<{ funcname: string; calls: number; total: number; self: number }[]>`
        select funcname, calls::int, total_time::float8 as total, self_time::float8 as self
          from pg_stat_user_functions order by total_time desc limit 25`;
      console.log(
        '\nSQL functions over the whole run (pg_stat_user_functions): calls, total ms, self ms, per call',
      );
      for (const r of rows)
        console.log(
          `  ${r.funcname.padEnd(32)} ${String(r.calls).padStart(7)} ${r.total.toFixed(0).padStart(8)} ${r.self.toFixed(0).padStart(8)}  ${(r.total / r.calls).toFixed(3)} ms`,
        );
      const statements = await owner<{ query: string; calls: number; total: number; rows: number }[]>`
        select query, calls::int, total_exec_time::float8 as total, rows::int from pg_stat_statements
         where toplevel = false order by total_exec_time desc limit 30`;
      console.log(
        '\nStatements inside SQL functions (pg_stat_statements): calls, total ms, ms per call, statement',
      );
      for (const r of statements)
        console.log(
          `  ${String(r.calls).padStart(7)} ${r.total.toFixed(0).padStart(7)} ${(r.total / r.calls).toFixed(3).padStart(7)}  ${r.query.replace(/\s+/g, ' ').slice(0, 150)}`,
        );
    }
    console.log(`bench:e2e finished in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return 0;
  } catch (err) {
    console.error('bench failed:', err);
    return 1;
  } finally {
    await cleanup();
  }
}

function report(results: RoundResult[], probes: Map<Variant, RoundResult>, unloaded: Map<string, number[]>) {
  const agg = (side: Side, variant: Variant) => {
    const rs = results.filter((r) => r.side === side && r.variant === variant);
    const messages = sum(rs.map((r) => r.messages));
    const latencies = rs.flatMap((r) => r.latencies);
    // Statements come from the probe (the timed rounds run on non-counting clients).
    const probe = side === 'ours' ? probes.get(variant) : undefined;
    const queries = probe?.queries ?? new Map<string, number>();
    const probed = probe?.messages ?? 1;
    const history = rs.flatMap((r) => r.historyEvents);
    return {
      throughput: (messages / sum(rs.map((r) => r.elapsedMs))) * 1000,
      perRound: rs.map((r) => (r.messages / r.elapsedMs) * 1000),
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      history: sum(history) / history.length,
      historyBreakdown: rs[0]?.historyBreakdown ?? new Map<string, number>(),
      dbPerMessage: sum(queries.values()) / probed,
      cpuPerMessage: {
        node: sum(rs.map((r) => r.cpu.node)) / messages,
        postgres: sum(rs.map((r) => r.cpu.postgres)) / messages,
        temporal: sum(rs.map((r) => r.cpu.temporal)) / messages,
      },
      queriesPerMessage: new Map([...queries].map(([k, v]) => [k, v / probed])),
      // From the probe too: the timed rounds share one pool, which cannot be told apart.
      pgPerMessage: new Map([...(probe?.pgComponents ?? [])].map(([k, v]) => [k, v / probed])),
      threadsPerMessage: (() => {
        const t = new Map<string, number>();
        for (const r of rs)
          for (const [name, ms] of r.threads) t.set(name, (t.get(name) ?? 0) + ms / messages);
        return t;
      })(),
      messages,
    };
  };
  const rows: string[][] = [
    [
      'reply',
      'side',
      'msgs',
      'msg/s (per round)',
      'p50 ms',
      'p99 ms',
      'history ev/msg',
      'DB round trips/msg',
    ],
  ];
  const table = new Map<string, ReturnType<typeof agg>>();
  for (const variant of VARIANTS)
    for (const side of SIDES[variant]) {
      const a = agg(side, variant);
      table.set(`${side}/${variant}`, a);
      rows.push([
        `${variant === 'one' ? '1' : '3'}-segment`,
        side,
        String(a.messages),
        `${a.throughput.toFixed(1)} (${a.perRound.map((x) => x.toFixed(1)).join(', ')})`,
        String(a.p50),
        String(a.p99),
        a.history.toFixed(1),
        a.dbPerMessage.toFixed(1),
      ]);
    }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  console.log('');
  console.log(
    'Latency: request sent (webhook POST / workflow start) → last segment received at the fake Telegram.',
  );
  console.log(
    `Every message goes to its own chat. Our delivery paces a private chat at one message per ${CHAT_INTERVALS_MS['telegram/direct']} ms\n` +
      '(Telegram allows ~1/s per chat), so a 3-segment reply takes ≥ 2.2 s by design; bare-paced waits the same\n' +
      'between its sends (a durable timer) and is the 3-segment baseline; bare does not pace at all (reference only).',
  );
  for (const [i, r] of rows.entries()) {
    console.log(r.map((c, j) => c.padEnd(widths[j]!)).join('  '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }

  console.log('\nTargets');
  const verdict = (ok: boolean) => (ok ? 'OK' : 'MISSED');
  for (const variant of VARIANTS) {
    const ours = table.get(`ours/${variant}`)!;
    const baseline = BASELINE[variant];
    const bare = table.get(`${baseline}/${variant}`)!;
    const ratio = ours.throughput / bare.throughput;
    const n = variant === 'one' ? '1' : '3';
    // Rounds alternate which side goes first; each round's ratio shows how much the figure swings.
    const perRound = ours.perRound.map((x, i) => (x / bare.perRound[i]!).toFixed(2)).join(', ');
    console.log(
      `  ${n}-segment throughput ours/${baseline} = ${ratio.toFixed(2)}× (per round ${perRound}; target ≥ ${TARGET_THROUGHPUT_RATIO[variant]}×): ${verdict(ratio >= TARGET_THROUGHPUT_RATIO[variant])}`,
    );
    const extra = ours.history - bare.history;
    console.log(
      `  ${n}-segment history events ours ${ours.history.toFixed(1)} vs ${baseline} ${bare.history.toFixed(1)} (${extra >= 0 ? '+' : ''}${extra.toFixed(1)}; target ≤ +${TARGET_HISTORY_EXTRA}): ${verdict(extra <= TARGET_HISTORY_EXTRA)}`,
    );
    for (const reference of SIDES[variant].filter(
      (x) => x !== 'ours' && x !== 'ours-10t' && x !== baseline,
    )) {
      const raw = table.get(`${reference}/${variant}`)!;
      console.log(
        `  (reference: ours/${reference} = ${(ours.throughput / raw.throughput).toFixed(2)}×, history ${ours.history.toFixed(1)} vs ${raw.history.toFixed(1)})`,
      );
    }
  }
  const spread = table.get('ours-10t/one');
  const oneTenant = table.get('ours/one');
  if (spread && oneTenant) {
    const ratio = oneTenant.throughput / spread.throughput;
    const perRound = oneTenant.perRound.map((x, i) => (x / spread.perRound[i]!).toFixed(2)).join(', ');
    console.log(
      `  1-segment throughput one tenant / ${TENANTS} tenants = ${ratio.toFixed(2)}× (per round ${perRound}; target ≥ ${TARGET_ONE_TENANT_RATIO}×): ${verdict(ratio >= TARGET_ONE_TENANT_RATIO)}`,
    );
  }
  const one = table.get('ours/one')!;
  console.log(
    `  1-segment history events ${one.history.toFixed(1)} (target ≤ ${TARGET_HISTORY_ONE_SEGMENT}): ${verdict(one.history <= TARGET_HISTORY_ONE_SEGMENT)}`,
  );
  console.log(
    `  1-segment DB round trips per message ${one.dbPerMessage.toFixed(2)} (target ≤ ${TARGET_DB_ROUND_TRIPS_ONE_SEGMENT}): ${verdict(one.dbPerMessage <= TARGET_DB_ROUND_TRIPS_ONE_SEGMENT)}`,
  );

  console.log(`\nUnloaded latency (${UNLOADED_MESSAGES} messages one at a time, ms): p50 / p99`);
  for (const variant of VARIANTS)
    for (const side of SIDES[variant]) {
      const l = unloaded.get(`${side}/${variant}`) ?? [];
      console.log(
        `  ${variant === 'one' ? '1' : '3'}-segment ${side.padEnd(10)}  ${String(percentile(l, 50)).padStart(5)} / ${String(percentile(l, 99)).padStart(5)}`,
      );
    }
  console.log(
    '\nCPU per message (ms; from the start of a round until its workflows completed): this process (app, worker,\n' +
      'fake Telegram, bench) / PostgreSQL / Temporal dev server — on 2 shared cores, the sum bounds throughput',
  );
  for (const variant of VARIANTS)
    for (const side of SIDES[variant]) {
      const c = table.get(`${side}/${variant}`)!.cpuPerMessage;
      console.log(
        `  ${variant === 'one' ? '1' : '3'}-segment ${side.padEnd(10)}  node ${c.node.toFixed(1).padStart(5)}  postgres ${c.postgres.toFixed(1).padStart(5)}  temporal ${c.temporal.toFixed(1).padStart(5)}  total ${(c.node + c.postgres + c.temporal).toFixed(1).padStart(5)}`,
      );
    }

  console.log(
    '\nThis process by thread (ms per message; threads under 0.1 ms left out; "node": the workflow threads of\n' +
      "both workers and V8's helper threads; tokio: the Temporal core SDK)",
  );
  for (const variant of VARIANTS)
    for (const side of SIDES[variant]) {
      const t = table.get(`${side}/${variant}`)!.threadsPerMessage;
      console.log(
        `  ${variant === 'one' ? '1' : '3'}-segment ${side.padEnd(10)}  ` +
          [...t]
            .filter(([, ms]) => ms >= 0.1)
            .sort((a, b) => b[1] - a[1])
            .map(([name, ms]) => `${name} ${ms.toFixed(1)}`)
            .join(', '),
      );
    }
  console.log('\nPostgreSQL by component (backend CPU, ms per message, in the statement probe)');
  for (const variant of VARIANTS) {
    const t = table.get(`ours/${variant}`)!.pgPerMessage;
    console.log(
      `  ${variant === 'one' ? '1' : '3'}-segment ours  ` +
        [...t]
          .sort((a, b) => b[1] - a[1])
          .map(([name, ms]) => `${name} ${ms.toFixed(2)}`)
          .join(', '),
    );
  }
  for (const variant of VARIANTS) {
    const ours = table.get(`ours/${variant}`)!;
    console.log(`\nOurs, ${variant === 'one' ? '1' : '3'}-segment: DB statements per message by component`);
    for (const [k, v] of [...ours.queriesPerMessage].sort((a, b) => b[1] - a[1]))
      console.log(`  ${v.toFixed(2).padStart(6)}  ${k}`);
  }
  for (const variant of VARIANTS)
    for (const side of SIDES[variant]) {
      const a = table.get(`${side}/${variant}`)!;
      console.log(
        `\nHistory of one ${side} ${variant === 'one' ? '1' : '3'}-segment workflow: ` +
          [...a.historyBreakdown]
            .sort((x, y) => y[1] - x[1])
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
      );
    }
  console.log(
    '\nNotes: DB round trips = statements sent by the application clients (postgres.js debug hook, counted in the\n' +
      'untimed probe), begin/commit included;\n' +
      'a statement executed for the first time on a connection costs one extra round trip (describe), and a new\n' +
      'connection reads the array types once (postgres.js set-up): neither is per message, neither is counted.\n' +
      'Statistics: the database is ANALYZEd after the warm-up, as autovacuum does in a running deployment (with the\n' +
      'statistics of empty tables the planner may pick a (tenant_id, …) index over the primary key); BENCH_ANALYZE=0 skips it.\n' +
      'Timed rounds: ingress and activities share one pool of 20 connections (`npm start`: 10 for the API, 10 for the worker); in the probe\n' +
      'the ingress and each activity type have their own pool, so statements and CPU are attributed.',
  );
}

const code = await main();
clearTimeout(watchdog);
process.exit(code);
