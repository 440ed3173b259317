// Scale benchmark: do Switchyard's costs stay flat as queued work grows?
//
//   npm run bench:scale      (env: SCALE_SMALL=2000/200 SCALE_LARGE=20000/2000 SCALE_PARKED=2000;
//                             messages/sessions per backlog, executions parked on an operator;
//                             SCALE_INGEST_CONCURRENCY=50; `--temporal cluster` for a real cluster;
//                             BENCH_SCALE_MEMLOG=<file>: the worker's memory every 2 s, as JSON lines;
//                             SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS, SWITCHYARD_WORKER_HEAP_MB:
//                             a cache or heap bound to try)
//
// Brings up its own embedded PostgreSQL (temp dir, migrated, track_functions on), a Temporal dev
// server (or cluster) and a fake Telegram Bot API on 127.0.0.1. For each backlog it records the
// messages through the real webhook route while no worker runs (every workflow started, waiting),
// then starts one worker and drains the backlog: every session's messages in order, one chat per
// session. It prints, for the small and the large backlog side by side with their ratio (target
// ≤ 1.1×): statements per message (the worker's pool, counted), database polls (execution_start
// calls) per second (per message for reference), the worker's RSS (max while draining; its median
// and the main thread's JS heap live after a full GC for reference), and
// history events per message. Then it parks SCALE_PARKED executions on a manual tool decision and
// prints the worker's RSS (target < 1 GB). The worker is runtime/worker.ts's, with its cache bound
// (SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS' default), in a child process of its own started with the
// heap bound bin/worker.sh gives a deployed worker (SWITCHYARD_WORKER_HEAP_MB; its RSS read from
// /proc, its statements counted on its pool). Exits by itself (watchdog: 40 minutes).

import { type ChildProcess, fork } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import postgres, { type Sql } from 'postgres';
import { Registry } from 'prom-client';
import { newApp } from '../api/app';
import { loadEnv } from '../config/env';
import { startEmbeddedPostgres } from '../db/embedded';
import { runMigrations } from '../db/migrate';
import { auditKeyFrom } from '../lib/audit-key';
import { createLogger } from '../lib/log';
import { createSecretBox } from '../lib/secret-box';
import { startWorkerService } from '../runtime/services';
import { startFakeTelegram } from '../tests/fakes/telegram';
import { startFakeToolProvider } from '../tests/fakes/tool-provider';
import { type SeededTelegram, seedTelegramTenant, telegramTextUpdate } from '../tests/helpers/seed';
import { benchTemporal, temporalModeFromArgs } from './temporal';

const backlog = (v: string | undefined, fallback: [number, number]): [number, number] => {
  const m = v ? /^(\d+)\/(\d+)$/.exec(v) : null;
  return m ? [Number(m[1]), Number(m[2])] : fallback;
};
const SMALL = backlog(process.env.SCALE_SMALL, [2000, 200]);
const LARGE = backlog(process.env.SCALE_LARGE, [20_000, 2000]);
const PARKED = Number(process.env.SCALE_PARKED ?? 2000);
const INGEST_CONCURRENCY = Number(process.env.SCALE_INGEST_CONCURRENCY ?? 50);
/** What bin/worker.sh launches a worker with (validated as the worker would). */
const HEAP_MB = loadEnv({
  SWITCHYARD_WORKER_HEAP_MB: process.env.SWITCHYARD_WORKER_HEAP_MB,
}).SWITCHYARD_WORKER_HEAP_MB;
const TARGET_RATIO = 1.1;
const TARGET_PARKED_RSS_MB = 1024;
const DEADLINE_MS = 40 * 60_000;
const QUEUE = 'bench-scale';
const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
const AUDIT_KEY = auditKeyFrom(MASTER_KEY);

Runtime.install({ logger: new DefaultLogger('ERROR') });
let cleanupNow: (() => Promise<void>) | null = null;
const abort = (why: string, code: number) => {
  console.error(`bench: ${why}; cleaning up`);
  void (cleanupNow?.() ?? Promise.resolve()).finally(() => process.exit(code));
};
setTimeout(() => abort('watchdog: still running', 2), DEADLINE_MS).unref();
process.on('SIGINT', () => abort('interrupted', 130));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** A client like createSql's (the audit key on every connection), counting its statements. */
function countedSql(url: string, max: number): { sql: Sql; count: () => number } {
  let n = 0;
  const sql = postgres(url, {
    max,
    idle_timeout: 0,
    onnotice: () => undefined,
    connection: { 'app.audit_key': AUDIT_KEY } as Record<string, string>,
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
    transform: { undefined: null },
    debug: () => {
      n++;
    },
  });
  return { sql, count: () => n };
}

interface RunFigures {
  messages: number;
  sessions: number;
  drainSeconds: number;
  statementsPerMessage: number;
  pollsPerMessage: number;
  pollsPerSecond: number;
  rssMb: number;
  rssMedianMb: number;
  heapMb: number;
  liveHeapMb: number;
  historyPerMessage: number;
  /** Event types of the sampled histories, per message. */
  historyEvents: Map<string, number>;
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'switchyard-bench-scale-'));
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const stop of childStops) await stop().catch(() => undefined);
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  };
  cleanupNow = cleanup;
  try {
    console.log(
      `bench:scale — ${cpus().length} cores; backlogs ${SMALL.join('/')} and ${LARGE.join('/')} (messages/sessions), ${PARKED} parked; worker heap bound ${HEAP_MB > 0 ? `${HEAP_MB} MB` : "V8's own"}`,
    );
    const db = await startEmbeddedPostgres({
      dataDir: join(root, 'pg'),
      port: await freePort(),
      ephemeral: true,
      settings: { track_functions: 'all', max_connections: '200' },
    });
    cleanups.push(() => db.stop());
    await runMigrations(db.url);
    const temporal = await benchTemporal(temporalModeFromArgs(), root);
    cleanups.push(() => temporal.stop());
    const env = temporal.env;
    const telegram = await startFakeTelegram();
    cleanups.push(() => telegram.close());
    const tools = await startFakeToolProvider();
    cleanups.push(() => tools.close());
    // A tool whose provider answers 500 and that has no receipt URL: every call goes to an operator.
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'status', status: 500 } : undefined));

    const owner = postgres(db.url, { max: 4, onnotice: () => undefined });
    cleanups.push(() => owner.end({ timeout: 5 }));
    const secrets = createSecretBox(MASTER_KEY);
    const log = createLogger({ level: 'silent' });
    const apiSql = countedSql(db.url, 20);
    cleanups.push(() => apiSql.sql.end({ timeout: 5 }));
    const app = newApp({
      sql: apiSql.sql,
      temporal: env.client,
      taskQueue: QUEUE,
      secrets,
      log,
      metrics: new Registry(),
      auditKey: AUDIT_KEY,
      adminToken: 'bench-admin-token-0123456789abcdef',
      temporalUiUrl: 'http://127.0.0.1:8233',
      temporalNamespace: 'default',
      now: () => Date.now(),
    });
    const tenant = async (): Promise<SeededTelegram> => {
      const t = await seedTelegramTenant(owner, secrets, {
        apiBaseUrl: telegram.url,
        tools: [
          {
            name: 'fax',
            description: 'Sends a fax (bench tool)',
            parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
            endpoint_url: `${tools.url}/tools/fax`,
            side_effect: true,
            idempotency: 'provider_key',
          },
        ],
        scripted: {
          rules: [
            {
              match: '^fax (\\S+)$',
              tool_call: { name: 'fax', arguments: { ref: '{{1}}' } },
              reply: 'Faxed',
            },
          ],
          default_reply: 'You said: {{text}}',
        },
      });
      telegram.addBot(t.botToken);
      return t;
    };

    let chatBase = 9_000_000;
    /** Records `messages` over `sessions` chats (round robin, so each chat's messages queue up). */
    const ingest = async (
      t: SeededTelegram,
      messages: number,
      sessions: number,
      text: (i: number) => string,
    ) => {
      const base = chatBase;
      chatBase += sessions;
      let next = 0;
      const post = async () => {
        for (let i = next++; i < messages; i = next++) {
          const res = await app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-telegram-bot-api-secret-token': t.webhookSecret,
            },
            body: JSON.stringify(telegramTextUpdate({ chatId: base + (i % sessions), text: text(i) })),
          });
          if (res.status !== 200) throw new Error(`webhook answered ${res.status}`);
        }
      };
      await Promise.all(Array.from({ length: INGEST_CONCURRENCY }, post));
    };
    const executionStartCalls = async () => {
      const [r] = await owner<{ calls: number }[]>`
        select coalesce(sum(calls), 0)::int as calls from pg_stat_user_functions where funcname = 'execution_start'`;
      return r!.calls;
    };
    const finishedCount = async (tenantId: string) => {
      const [r] = await owner<{ n: number }[]>`
        select count(*)::int as n from message_event where tenant_id = ${tenantId} and status in ('replied', 'failed')`;
      return r!.n;
    };
    // The worker in a process of its own (as `npm run worker` runs), so its RSS is its own.
    const startWorker = () =>
      forkWorker({ databaseUrl: db.url, temporalAddress: env.address, taskQueue: QUEUE, dataDir: root });

    console.log('bundling the workflows (a first worker)…');
    const warm = await startWorker();
    const warmTenant = await tenant();
    await ingest(warmTenant, 100, 20, (i) => `warm ${i}`);
    while ((await finishedCount(warmTenant.tenantId)) < 100) await new Promise((r) => setTimeout(r, 500));
    await warm.stop();

    const run = async ([messages, sessions]: [number, number]): Promise<RunFigures> => {
      const t = await tenant();
      const ingested = Date.now();
      await ingest(t, messages, sessions, (i) => `message ${i}`);
      console.log(
        `  ${messages}/${sessions}: recorded in ${((Date.now() - ingested) / 1000).toFixed(1)} s; draining…`,
      );
      const polls0 = await executionStartCalls();
      const w = await startWorker();
      // From the worker's ready (its workflow bundle built): the drain, not the start-up, is timed.
      const started = Date.now();
      const rssSamples: number[] = [];
      const sampler = setInterval(() => {
        const kb = rssOf(w.pid);
        if (kb > 0) rssSamples.push(kb);
      }, 500);
      while ((await finishedCount(t.tenantId)) < messages) await new Promise((r) => setTimeout(r, 1000));
      const drainSeconds = (Date.now() - started) / 1000;
      clearInterval(sampler);
      const statements = await w.statements();
      await w.stop();
      const polls = (await executionStartCalls()) - polls0;
      const sample = await owner<{ workflow_id: string }[]>`
        select workflow_id from message_event where tenant_id = ${t.tenantId} order by random() limit 50`;
      let events = 0;
      const historyEvents = new Map<string, number>();
      for (const s of sample) {
        const history = await env.client.workflow.getHandle(s.workflow_id).fetchHistory();
        for (const e of history.events ?? []) {
          const type = eventTypeName(e);
          historyEvents.set(type, (historyEvents.get(type) ?? 0) + 1 / sample.length);
          events++;
        }
      }
      return {
        messages,
        sessions,
        drainSeconds,
        statementsPerMessage: statements.n / messages,
        heapMb: statements.heapMaxMb,
        liveHeapMb: statements.liveHeapMaxMb,
        historyEvents,
        pollsPerMessage: polls / messages,
        pollsPerSecond: polls / drainSeconds,
        rssMb: Math.max(0, ...rssSamples) / 1024,
        rssMedianMb: median(rssSamples) / 1024,
        historyPerMessage: events / sample.length,
      };
    };

    const small = await run(SMALL);
    const large = await run(LARGE);
    const rows: [string, (f: RunFigures) => number, number][] = [
      ['statements per message (worker)', (f) => f.statementsPerMessage, 1],
      ['database polls per message (reference)', (f) => f.pollsPerMessage, 2],
      ['database polls per second', (f) => f.pollsPerSecond, 1],
      ['worker RSS (MB, max while draining)', (f) => f.rssMb, 0],
      // The RSS swings with V8's collections (a few hundred MB of garbage between two full GCs):
      // the median is what the worker holds while it works, the live heap what a full GC keeps.
      ['worker RSS (MB, median while draining; reference)', (f) => f.rssMedianMb, 0],
      ['worker JS heap in use (MB, max; reference)', (f) => f.heapMb, 0],
      ['worker JS heap live after a full GC (MB, max; reference)', (f) => f.liveHeapMb, 0],
      ['history events per message', (f) => f.historyPerMessage, 1],
    ];
    console.log('');
    console.log(`| figure | ${SMALL.join('/')} | ${LARGE.join('/')} | ratio | target |`);
    console.log('|---|---|---|---|---|');
    let missed = 0;
    for (const [label, of, digits] of rows) {
      const ratio = of(large) / Math.max(of(small), 1e-9);
      const reference = label.includes('reference');
      if (ratio > TARGET_RATIO && !reference) missed++;
      console.log(
        `| ${label} | ${of(small).toFixed(digits)} | ${of(large).toFixed(digits)} | ${ratio.toFixed(2)}× | ${reference ? '' : `≤ ${TARGET_RATIO}× ${ratio <= TARGET_RATIO ? 'met' : 'MISSED'}`} |`,
      );
    }
    for (const type of new Set([...small.historyEvents.keys(), ...large.historyEvents.keys()])) {
      const [a, b] = [small.historyEvents.get(type) ?? 0, large.historyEvents.get(type) ?? 0];
      console.log(`| · ${type} per message | ${a.toFixed(1)} | ${b.toFixed(1)} | | (reference) |`);
    }
    console.log(
      `| drain time (s), messages/s | ${small.drainSeconds.toFixed(0)}, ${(small.messages / small.drainSeconds).toFixed(0)} | ${large.drainSeconds.toFixed(0)}, ${(large.messages / large.drainSeconds).toFixed(0)} | | (reference) |`,
    );

    // Executions parked on an operator: their workflows wait on a decision signal (and a 10 min
    // re-check); the worker keeps them cached.
    if (PARKED > 0) {
      const t = await tenant();
      const w = await startWorker();
      await ingest(t, PARKED, PARKED, (i) => `fax P-${i}`);
      for (;;) {
        const [r] = await owner<{ n: number }[]>`
          select count(*)::int as n from tool_invocation where tenant_id = ${t.tenantId} and status = 'manual'`;
        if (r!.n >= PARKED) break;
        await new Promise((res) => setTimeout(res, 1000));
      }
      await new Promise((res) => setTimeout(res, 2000));
      const rssMb = rssOf(w.pid) / 1024;
      if (rssMb >= TARGET_PARKED_RSS_MB) missed++;
      console.log(
        `| ${PARKED} executions parked on a manual decision: worker RSS | ${rssMb.toFixed(0)} MB | | | < ${TARGET_PARKED_RSS_MB} MB ${rssMb < TARGET_PARKED_RSS_MB ? 'met' : 'MISSED'} |`,
      );
      await w.stop();
    }
    console.log(missed === 0 ? '\nall scale targets met' : `\n${missed} scale target(s) missed`);
    await cleanup();
    process.exit(0);
  } catch (err) {
    console.error(err);
    await cleanup();
    process.exit(1);
  }
}

interface WorkerConfig {
  databaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  dataDir: string;
}

/** A worker child (this file with --worker); stops with the bench, or after DEADLINE_MS. */
async function forkWorker(cfg: WorkerConfig) {
  const child: ChildProcess = fork(import.meta.filename, ['--worker'], {
    env: { ...process.env, BENCH_SCALE_WORKER: JSON.stringify(cfg) },
    execArgv: [...process.execArgv, ...(HEAP_MB > 0 ? [`--max-old-space-size=${HEAP_MB}`] : [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const next = (type: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const onMessage = (m: Record<string, unknown>) => {
        if (m.type !== type) return;
        child.off('message', onMessage);
        resolve(m);
      };
      child.on('message', onMessage);
      void exited.then(() => reject(new Error('the worker exited')));
    });
  await next('ready');
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.send({ type: 'stop' });
    const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000));
    if ((await Promise.race([exited, timer])) === 'timeout') child.kill('SIGKILL');
  };
  childStops.add(stop);
  return {
    pid: child.pid!,
    /** Statements on its pool so far, and the largest JavaScript heap in use (MB) it saw. */
    async statements(): Promise<{ n: number; heapMaxMb: number; liveHeapMaxMb: number }> {
      const reply = next('statements');
      child.send({ type: 'statements' });
      const r = await reply;
      return { n: Number(r.n), heapMaxMb: Number(r.heapMaxMb), liveHeapMaxMb: Number(r.liveHeapMaxMb) };
    },
    async stop() {
      childStops.delete(stop);
      await stop();
    },
  };
}

/** An event's type from the attributes it carries: activityTaskScheduledEventAttributes → ActivityTaskScheduled. */
function eventTypeName(e: object): string {
  const key = Object.entries(e).find(([k, v]) => k.endsWith('EventAttributes') && v)?.[0] ?? 'unknown';
  return key.replace(/EventAttributes$/, '').replace(/^./, (c) => c.toUpperCase());
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.floor(sorted.length / 2)]!;
};

/** A process's resident set (kB), from /proc (0 once it is gone). */
function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/**
 * The child: the worker process's worker (runtime/services.ts startWorkerService: the cache bound,
 * the repair sweeper's Schedule, the audit sealer) on a counting pool, with the environment's
 * defaults. The sweeper starts messages whose workflow start failed while the backlog was
 * recorded (an overloaded dev server refuses some), as it does in a deployment.
 */
async function serveWorker(): Promise<void> {
  const cfg = JSON.parse(process.env.BENCH_SCALE_WORKER ?? '') as WorkerConfig;
  setTimeout(() => process.exit(3), DEADLINE_MS).unref();
  const sql = countedSql(cfg.databaseUrl, 40);
  const connection = await NativeConnection.connect({ address: cfg.temporalAddress });
  const client = new Client({ connection: await Connection.connect({ address: cfg.temporalAddress }) });
  const { worker, done: running } = await startWorkerService({
    env: loadEnv({
      TEMPORAL_TASK_QUEUE: cfg.taskQueue,
      SWITCHYARD_WORKER_PORT: '0',
      SWITCHYARD_DATA_DIR: cfg.dataDir,
      LOG_LEVEL: 'silent',
      // A deployment's own cache bound, when the bench is run with one.
      ...(process.env.SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS
        ? { SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS: process.env.SWITCHYARD_WORKER_MAX_CACHED_WORKFLOWS }
        : {}),
    }),
    connection,
    temporal: client,
    sql: sql.sql,
    secrets: createSecretBox(MASTER_KEY),
    log: createLogger({ level: 'silent' }),
  });
  // The JavaScript heap in use (max, sampled): next to the RSS, it tells live objects from memory
  // V8 has not handed back.
  let heapMax = 0;
  setInterval(() => {
    heapMax = Math.max(heapMax, process.memoryUsage().heapUsed);
  }, 500).unref();
  // What a full (mark-compact) collection left: the live objects, without the garbage V8 lets
  // accumulate between collections (which grows with the allocation rate, not with the backlog).
  let liveHeapMax = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if ((e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR)
        liveHeapMax = Math.max(liveHeapMax, process.memoryUsage().heapUsed);
    }
  }).observe({ entryTypes: ['gc'] });
  // BENCH_SCALE_MEMLOG=<file>: a line every 2 s (memory by kind, cached workflows, in-flight work),
  // to tell memory that grows with the backlog from a plateau reached sooner or later.
  const memlog = process.env.BENCH_SCALE_MEMLOG;
  if (memlog) {
    const t0 = Date.now();
    setInterval(() => {
      const m = process.memoryUsage();
      const s = worker.getStatus();
      const mb = (n: number) => Math.round(n / 2 ** 20);
      appendFileSync(
        memlog,
        `${JSON.stringify({
          pid: process.pid,
          s: Math.round((Date.now() - t0) / 1000),
          rss: mb(m.rss),
          heapUsed: mb(m.heapUsed),
          heapTotal: mb(m.heapTotal),
          external: mb(m.external),
          arrayBuffers: mb(m.arrayBuffers),
          state: worker.getState(),
          polling: s.hasOutstandingWorkflowPoll,
          cached: s.numCachedWorkflows,
          activations: s.numInFlightWorkflowActivations,
          activities: s.numInFlightActivities,
        })}\n`,
      );
    }, 2000).unref();
  }
  process.on('message', (m: { type?: string }) => {
    if (m?.type === 'statements')
      process.send?.({
        type: 'statements',
        n: sql.count(),
        heapMaxMb: heapMax / 2 ** 20,
        liveHeapMaxMb: liveHeapMax / 2 ** 20,
      });
    if (m?.type === 'stop') {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      void running.finally(async () => {
        await sql.sql.end({ timeout: 2 }).catch(() => undefined);
        process.exit(0);
      });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ type: 'ready' });
}

const childStops = new Set<() => Promise<void>>();
if (process.argv.includes('--worker')) await serveWorker();
else await main();
