// Scale benchmark: do Switchyard's costs stay flat as queued work grows?
//
//   npm run bench:scale      (env: SCALE_SMALL=2000/200 SCALE_LARGE=20000/2000 SCALE_PARKED=2000;
//                             messages/sessions per backlog, executions parked on an operator;
//                             SCALE_INGEST_CONCURRENCY=50; `--temporal cluster` for a real cluster)
//
// Brings up its own embedded PostgreSQL (temp dir, migrated, track_functions on), a Temporal dev
// server (or cluster) and a fake Telegram Bot API on 127.0.0.1. For each backlog it records the
// messages through the real webhook route while no worker runs (every workflow started, waiting),
// then starts one worker and drains the backlog: every session's messages in order, one chat per
// session. It prints, for the small and the large backlog side by side with their ratio (target
// ≤ 1.1×): statements per message (the worker's pool, counted), database polls (execution_start
// calls) per message and per second, the worker's RSS (this process: API, worker and fakes), and
// history events per message. Then it parks SCALE_PARKED executions on a manual tool decision and
// prints the process RSS (target < 1 GB). Exits by itself (watchdog: 40 minutes).

import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import postgres, { type Sql } from 'postgres';
import { Registry } from 'prom-client';
import { createActivities } from '../activities';
import { newApp } from '../api/app';
import { startEmbeddedPostgres } from '../db/embedded';
import { runMigrations } from '../db/migrate';
import { auditKeyFrom } from '../lib/audit-key';
import { createLogger } from '../lib/log';
import { createSecretBox } from '../lib/secret-box';
import { workflowsPath } from '../runtime/worker';
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
  historyPerMessage: number;
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'switchyard-bench-scale-'));
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  };
  cleanupNow = cleanup;
  try {
    console.log(
      `bench:scale — ${cpus().length} cores; backlogs ${SMALL.join('/')} and ${LARGE.join('/')} (messages/sessions), ${PARKED} parked`,
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
    const workerSql = countedSql(db.url, 40);
    cleanups.push(() => Promise.all([apiSql.sql.end({ timeout: 5 }), workerSql.sql.end({ timeout: 5 })]));
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
    const startWorker = async () => {
      const worker = await Worker.create({
        connection: env.nativeConnection,
        namespace: 'default',
        taskQueue: QUEUE,
        workflowsPath,
        activities: createActivities({
          sql: workerSql.sql,
          secrets,
          log,
          suspendedReply: 'unavailable',
          workerId: 'bench-scale',
          sendTimeoutMs: 10_000,
        }),
        maxConcurrentActivityTaskExecutions: 100,
        shutdownGraceTime: '5 seconds',
      });
      const running = worker.run();
      return {
        worker,
        async stop() {
          if (worker.getState() === 'RUNNING') worker.shutdown();
          await running;
        },
      };
    };

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
      const statements0 = workerSql.count();
      const polls0 = await executionStartCalls();
      let rss = 0;
      const sampler = setInterval(() => {
        rss = Math.max(rss, process.memoryUsage().rss);
      }, 500);
      const started = Date.now();
      const w = await startWorker();
      while ((await finishedCount(t.tenantId)) < messages) await new Promise((r) => setTimeout(r, 1000));
      const drainSeconds = (Date.now() - started) / 1000;
      clearInterval(sampler);
      await w.stop();
      const polls = (await executionStartCalls()) - polls0;
      const sample = await owner<{ workflow_id: string }[]>`
        select workflow_id from message_event where tenant_id = ${t.tenantId} order by random() limit 20`;
      let events = 0;
      for (const s of sample)
        events += (await env.client.workflow.getHandle(s.workflow_id).describe()).historyLength;
      return {
        messages,
        sessions,
        drainSeconds,
        statementsPerMessage: (workerSql.count() - statements0) / messages,
        pollsPerMessage: polls / messages,
        pollsPerSecond: polls / drainSeconds,
        rssMb: rss / 2 ** 20,
        historyPerMessage: events / sample.length,
      };
    };

    const small = await run(SMALL);
    const large = await run(LARGE);
    const rows: [string, (f: RunFigures) => number, number][] = [
      ['statements per message (worker)', (f) => f.statementsPerMessage, 1],
      ['database polls per message', (f) => f.pollsPerMessage, 2],
      ['database polls per second', (f) => f.pollsPerSecond, 1],
      ['process RSS (MB, max while draining)', (f) => f.rssMb, 0],
      ['history events per message', (f) => f.historyPerMessage, 1],
    ];
    console.log('');
    console.log(`| figure | ${SMALL.join('/')} | ${LARGE.join('/')} | ratio | target |`);
    console.log('|---|---|---|---|---|');
    let missed = 0;
    for (const [label, of, digits] of rows) {
      const ratio = of(large) / Math.max(of(small), 1e-9);
      if (ratio > TARGET_RATIO) missed++;
      console.log(
        `| ${label} | ${of(small).toFixed(digits)} | ${of(large).toFixed(digits)} | ${ratio.toFixed(2)}× | ≤ ${TARGET_RATIO}× ${ratio <= TARGET_RATIO ? 'met' : 'MISSED'} |`,
      );
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
      global.gc?.();
      await new Promise((res) => setTimeout(res, 2000));
      const rssMb = process.memoryUsage().rss / 2 ** 20;
      if (rssMb >= TARGET_PARKED_RSS_MB) missed++;
      console.log(
        `| ${PARKED} executions parked on a manual decision: process RSS | ${rssMb.toFixed(0)} MB | | | < ${TARGET_PARKED_RSS_MB} MB ${rssMb < TARGET_PARKED_RSS_MB ? 'met' : 'MISSED'} |`,
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

await main();
