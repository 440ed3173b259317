import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newApp } from '../../api/app';
import { PROBE_DEADLINE_MS } from '../../api/service/routes';
import { createSql } from '../../db/client';
import { housekeepingScheduleId } from '../../runtime/housekeeping-schedule';
import { sweeperScheduleId } from '../../runtime/sweeper-schedule';
import { apiProcess, freePort, Proc, type ServiceSettings } from '../chaos/topology';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { testLoginUrl } from '../helpers/db-logins';
import { createHarness, type Harness, TEST_ADMIN_TOKEN, TEST_MASTER_KEY } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

// SIGTERM during a burst of webhooks, against the product's own entry points (`bin/api.ts`,
// `bin/worker.sh`) in child processes on the suite's PostgreSQL and Temporal. The API turns
// /readyz 503 first, keeps serving for its drain period (2 s here), then closes its listener after
// the in-flight requests: every webhook it acknowledged has its message row. Then a worker works
// through the backlog and gets SIGTERM: it stops polling, its /readyz turns 503, its running
// activities (Telegram answering slowly) finish within the grace period (5 s) and it exits; a
// replacement worker replies to every accepted message exactly once. Every process the test
// started has exited, ended by its pid. And /readyz answers within its probe deadline when a
// dependency hangs (PostgreSQL's connect timeout alone is 10 s).

const ROOT = resolve(import.meta.dirname, '../..');
const DRAIN_S = 2;
const GRACE_S = 5;
const LANES = 6;
const HEAP_MB = 256;
/** The burst stops by itself at this many webhooks even if the API never closed. */
const MAX_WEBHOOKS = 400;

interface Sent {
  key: string;
  chatId: number;
  startedAt: number;
  status: number | 'error';
}

interface Probe {
  at: number;
  status: number | 'error';
  body?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `url` every 50 ms until it fails (after `armed()`) or `untilMs` passes. */
async function pollReadiness(url: string, armed: () => boolean, untilMs: number): Promise<Probe[]> {
  const probes: Probe[] = [];
  while (Date.now() < untilMs) {
    const at = Date.now();
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      probes.push({ at, status: res.status, body: await res.text() });
    } catch {
      probes.push({ at, status: 'error' });
      if (armed()) break;
    }
    await sleep(50);
  }
  return probes;
}

/** Resolves with the exit code and when it came, or throws after `timeoutMs`. */
function exitOf(proc: Proc, timeoutMs: number): Promise<{ code: number | null; at: number }> {
  const child = proc.child!;
  if (child.exitCode !== null) return Promise.resolve({ code: child.exitCode, at: Date.now() });
  return new Promise((ok, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`${proc.name} did not exit in ${timeoutMs} ms`)),
      timeoutMs,
    );
    child.once('exit', (code) => {
      clearTimeout(timer);
      ok({ code, at: Date.now() });
    });
  });
}

const gone = (pid: number | undefined) => {
  try {
    process.kill(pid!, 0);
    return false;
  } catch {
    return true;
  }
};

describe('SIGTERM during a burst of webhooks', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let t: SeededTelegram;
  let dir: string;
  let api: { proc: Proc; url: string };
  let worker: Proc;
  let workerUrl: string;
  let replacement: WorkerProcess | undefined;
  const sent: Sent[] = [];

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    dir = mkdtempSync(join(tmpdir(), 'switchyard-drain-'));
    const settings: ServiceSettings = {
      databaseUrl: testLoginUrl(inject('databaseUrl'), 'api'),
      workerDatabaseUrl: testLoginUrl(inject('databaseUrl'), 'worker'),
      temporalAddress: inject('temporalAddress'),
      taskQueue: h.taskQueue,
      masterKey: TEST_MASTER_KEY,
      adminToken: TEST_ADMIN_TOKEN,
      dir,
      env: { SWITCHYARD_DRAIN_S: String(DRAIN_S) },
    };
    const metricsPort = await freePort();
    workerUrl = `http://127.0.0.1:${metricsPort}`;
    // Through the launcher a deployment uses (npm run worker, the image's `switchyard worker`),
    // with a heap bound of its own.
    worker = new Proc(
      'worker-1',
      'sh',
      [join(ROOT, 'bin/worker.sh')],
      {
        SWITCHYARD_WORKER_HEAP_MB: String(HEAP_MB),
        DATABASE_URL: settings.workerDatabaseUrl,
        TEMPORAL_ADDRESS: settings.temporalAddress,
        TEMPORAL_TASK_QUEUE: settings.taskQueue,
        SWITCHYARD_MASTER_KEY: TEST_MASTER_KEY,
        SWITCHYARD_EGRESS: 'allow_private',
        SWITCHYARD_SHUTDOWN_GRACE_S: String(GRACE_S),
        SWITCHYARD_WORKER_PORT: String(metricsPort),
        SWITCHYARD_TEMPORAL_METRICS_PORT: String(await freePort()),
        LOG_LEVEL: 'info',
      },
      join(dir, 'worker-1.log'),
      (p) => p.waitForOutput('worker running'),
    );
    api = await apiProcess(settings, 1);
  }, 180_000);

  afterAll(async () => {
    // Whatever is still running was started here: ended by its pid.
    await Promise.all([api?.proc.kill('SIGKILL'), worker?.kill('SIGKILL'), replacement?.kill('SIGKILL')]);
    for (const id of [sweeperScheduleId(h.taskQueue), housekeepingScheduleId(h.taskQueue)])
      await h.temporal.schedule
        .getHandle(id)
        .delete()
        .catch(() => undefined);
    await h?.close();
    await telegram?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the API: /readyz 503 first, serves through the drain, closes after in-flight requests; no acknowledged webhook lost', async () => {
    let sigtermAt = 0;
    let next = 0;
    const post = async (lane: number) => {
      for (;;) {
        const i = next++;
        if (i >= MAX_WEBHOOKS) return;
        const chatId = 7_000_000 + i;
        const update = telegramTextUpdate({ chatId, text: `burst ${i}`, messageId: 1 });
        const entry: Sent = { key: `${chatId}:1`, chatId, startedAt: Date.now(), status: 'error' };
        sent.push(entry);
        try {
          const res = await fetch(`${api.url}/v1/webhooks/telegram/${t.routeKey}`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-telegram-bot-api-secret-token': t.webhookSecret,
            },
            body: JSON.stringify(update),
            signal: AbortSignal.timeout(15_000),
          });
          await res.arrayBuffer();
          entry.status = res.status;
        } catch {
          // Refused or reset: the listener has closed (Telegram delivers it again later).
          if (sigtermAt > 0) return;
        }
        if (lane === 0 && sigtermAt === 0 && sent.filter((s) => s.status === 200).length >= 20) {
          sigtermAt = Date.now();
          api.proc.signal('SIGTERM');
        }
      }
    };
    const readiness = pollReadiness(`${api.url}/readyz`, () => sigtermAt > 0, Date.now() + 60_000);
    await Promise.all(Array.from({ length: LANES }, (_, lane) => post(lane)));
    const exit = await exitOf(api.proc, 30_000);
    const probes = await readiness;

    expect(sigtermAt).toBeGreaterThan(0);
    expect(exit.code).toBe(0);
    // It drained for the whole period and then stopped within the close bound.
    expect(exit.at - sigtermAt).toBeGreaterThanOrEqual(DRAIN_S * 1000);
    expect(exit.at - sigtermAt).toBeLessThan(DRAIN_S * 1000 + 15_000);

    // Readiness: 200 until SIGTERM, then 503 `draining` while still answering, then no answer.
    const first503 = probes.findIndex((p) => p.status === 503);
    const firstError = probes.findIndex((p) => p.status === 'error');
    expect(first503).toBeGreaterThan(0);
    expect(probes.slice(0, first503).every((p) => p.status === 200)).toBe(true);
    // (a probe records when it was sent: one sent just before the signal may arrive after it)
    expect(probes[first503]!.at).toBeGreaterThanOrEqual(sigtermAt - 1_000);
    expect(JSON.parse(probes[first503]!.body!)).toMatchObject({ status: 'draining' });
    expect(firstError).toBeGreaterThan(first503);
    expect(probes.slice(first503, firstError).every((p) => p.status === 503)).toBe(true);
    expect(probes.slice(first503, firstError).length).toBeGreaterThan(5);

    // Webhooks: every answer was 200, also to requests sent while draining (after readiness
    // turned 503); only requests after the listener closed got no answer.
    const answered = sent.filter((s) => s.status !== 'error');
    expect(answered.every((s) => s.status === 200)).toBe(true);
    expect(answered.some((s) => s.startedAt > probes[first503]!.at)).toBe(true);
    const lastAnsweredStart = Math.max(...answered.map((s) => s.startedAt));
    expect(sent.filter((s) => s.status === 'error').every((s) => s.startedAt >= sigtermAt)).toBe(true);
    expect(lastAnsweredStart).toBeGreaterThan(sigtermAt);

    // No acknowledged webhook lost: each has its message row.
    const rows = await h.sql<{ external_message_id: string }[]>`
      select external_message_id from message_event where tenant_id = ${t.tenantId}`;
    const recorded = new Set(rows.map((r) => r.external_message_id));
    expect(answered.filter((s) => !recorded.has(s.key)).map((s) => s.key)).toEqual([]);
    expect(gone(api.proc.pid)).toBe(true);
  }, 120_000);

  it('the worker: /readyz 503 at once, running activities finish within the grace period, it exits; every accepted message replied once', async () => {
    const accepted = sent.filter((s) => s.status === 200);
    expect(accepted.length).toBeGreaterThan(20);
    // The accepted messages wait on the task queue; Telegram answers slowly, so sends are in
    // flight (and most messages not yet started) when the worker is told to stop.
    telegram.setFaultPlan((req) => (req.method === 'sendMessage' ? { kind: 'delay', ms: 1_000 } : undefined));
    await worker.start();
    await waitFor(() => telegram.sent.length >= 3, { timeoutMs: 60_000, label: 'replies under way' });
    expect(telegram.sent.length).toBeLessThan(accepted.length);
    expect((await fetch(`${workerUrl}/readyz`)).status).toBe(200);

    const sigtermAt = Date.now();
    worker.signal('SIGTERM');
    const readiness = pollReadiness(`${workerUrl}/readyz`, () => true, Date.now() + 30_000);
    const exit = await exitOf(worker, 60_000);
    const probes = await readiness;

    expect(exit.code).toBe(0);
    // It ran with the heap bound it was given (V8's limit: that old generation plus the young one).
    const running = readFileSync(join(dir, 'worker-1.log'), 'utf8')
      .split('\n')
      .filter((l) => l.includes('"worker running"'))
      .map((l) => JSON.parse(l) as { heapLimitMb: number });
    expect(running).toHaveLength(1);
    expect(running[0]!.heapLimitMb).toBeGreaterThanOrEqual(HEAP_MB);
    expect(running[0]!.heapLimitMb).toBeLessThan(HEAP_MB + 128);
    // Within the grace period (plus closing its connections).
    expect(exit.at - sigtermAt).toBeLessThan(GRACE_S * 1000 + 5_000);
    const answered = probes.filter((p) => p.status !== 'error');
    expect(answered.length).toBeGreaterThan(0);
    expect(answered.every((p) => p.status === 503)).toBe(true);
    expect(gone(worker.pid)).toBe(true);

    // The rest is handed to another worker: every accepted message is replied, exactly once.
    telegram.clearFaults();
    replacement = await startWorkerProcess(h.taskQueue);
    await waitFor(
      async () => {
        const [row] = await h.sql<{ n: number }[]>`
          select count(*)::int as n from message_event where tenant_id = ${t.tenantId} and status = 'replied'`;
        return row!.n >= accepted.length;
      },
      { timeoutMs: 120_000, label: 'every accepted message replied' },
    );
    for (const s of accepted) expect(telegram.sentTo(s.chatId).map((m) => m.text)).toHaveLength(1);
    await replacement.kill('SIGTERM');
    expect(gone(replacement.pid)).toBe(true);
  }, 240_000);
});

describe('readiness answers within its deadline', () => {
  it('PostgreSQL accepting connections but never answering: /readyz is 503 within the probe deadline', async () => {
    const h = await createHarness();
    // A listener that accepts and stays silent: a query on it would wait for the connect timeout.
    const sockets = new Set<Socket>();
    const silent = createServer((s) => sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as AddressInfo;
    const hanging = createSql(`postgres://nobody:nothing@127.0.0.1:${port}/none`, { max: 1 });
    try {
      const app = newApp({ ...h.appDeps, sql: hanging });
      const started = Date.now();
      const res = await app.request('/readyz');
      expect(Date.now() - started).toBeLessThan(PROBE_DEADLINE_MS + 1_500);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ status: 'not_ready', postgres: false, temporal: true });
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
      await hanging.end({ timeout: 0 });
      await h.close();
    }
  });
});
