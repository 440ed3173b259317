import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../activities';
import type { ActivityDeps } from '../../activities/deps';
import { housekeepingActivities } from '../../activities/housekeeping';
import { newApp } from '../../api/app';
import { deadLetterDepth } from '../../db/queries/housekeeping';
import { housekeepingScheduleId } from '../../runtime/housekeeping-schedule';
import { sweeperScheduleId } from '../../runtime/sweeper-schedule';
import { startWorkerHttp, type WorkerHttp } from '../../runtime/worker-http';
import { createMetrics, createRegistry, type Metrics, registerDlqDepth } from '../../telemetry/metrics';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { testLoginUrl } from '../helpers/db-logins';
import { messagesOf, waitForFinished } from '../helpers/delivery';
import { seedExecution } from '../helpers/execution-seed';
import { createHarness, type Harness, TEST_MASTER_KEY } from '../helpers/harness';
import { holdLock } from '../helpers/hold-lock';
import { type SeededTelegram, seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// What an SRE scrapes, after real traffic on real PostgreSQL and Temporal: the API's /metrics and
// the worker's (its own HTTP server, on the registry its activities record into). Every series is
// checked for its label names and values; no label may carry an id, a URL or a route key.

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The one sample of `name` with exactly these labels (0 when absent). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === Object.keys(labels).length &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  expect(found.length, `${name}${JSON.stringify(labels)}`).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

/** Label names per Switchyard series (histograms: of their _count; _bucket adds `le`). */
const LABELS: Record<string, string[]> = {
  switchyard_webhook_requests_total: ['channel', 'outcome'],
  switchyard_webhook_ack_seconds: ['channel', 'outcome'],
  switchyard_messages_finished_total: ['outcome', 'status'],
  switchyard_message_reply_seconds: ['channel'],
  switchyard_execution_wait_seconds: ['permit_limited'],
  switchyard_execution_waits_total: ['reason'],
  switchyard_model_calls_total: ['model_family', 'outcome', 'provider', 'reason_class'],
  switchyard_model_call_seconds: ['model_family', 'outcome', 'provider'],
  switchyard_model_tokens_total: ['direction', 'model_family', 'provider'],
  switchyard_tool_invocations_total: ['outcome'],
  switchyard_tool_dispatches_total: ['result'],
  switchyard_tool_dispatch_seconds: ['result'],
  switchyard_segment_sends_total: ['channel', 'result'],
  switchyard_segment_send_seconds: ['channel', 'result'],
  switchyard_sweeper_actions_total: ['action', 'reason_class'],
  switchyard_dlq_depth: ['kind'],
  switchyard_housekeeping_runs_total: ['outcome'],
  switchyard_housekeeping_removed_total: ['part'],
  switchyard_worker_ready: [],
  http_requests_total: ['method', 'ok', 'route', 'status'],
  http_request_duration_seconds: ['method', 'ok', 'route', 'status'],
};

const seriesOf = (name: string) => name.replace(/_(bucket|sum|count)$/, '');

/** Ids as Switchyard mints them (`t_…`, `evt_…`) or as tests seed them. */
const ID_LIKE = /^(t|cb|evt|app|mp|bp|ses|sec|inv|seg|rep|dl|use|req|msg|repair)[_-][0-9A-Za-z]/;

function checkLabels(samples: Sample[], secrets: string[]) {
  for (const s of samples) {
    const series = seriesOf(s.name);
    const expected = LABELS[series] ?? LABELS[s.name];
    if (expected) {
      const names = Object.keys(s.labels)
        .filter((k) => k !== 'le' || !s.name.endsWith('_bucket'))
        .sort();
      expect(names, s.name).toEqual(expected);
    }
    for (const [k, v] of Object.entries(s.labels)) {
      const where = `${s.name} ${k}="${v}"`;
      expect(v, where).not.toMatch(ID_LIKE);
      expect(v, where).not.toContain('://');
      for (const secret of secrets) expect(v, where).not.toContain(secret);
      if (k === 'route') {
        // A pattern: no segment that could be a route key (≥ 22 base64url characters) or an id.
        for (const segment of v.split('/')) expect(segment.length, where).toBeLessThan(22);
      } else if (k !== 'le') {
        expect(v, where).toMatch(/^[A-Za-z0-9_.-]{1,40}$/);
      }
    }
  }
}

describe('metrics after a real run: API /metrics and the worker HTTP server', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let openai: FakeOpenAI;
  let registry: Registry;
  let metrics: Metrics;
  let http: WorkerHttp;
  let worker: Awaited<ReturnType<Harness['startWorker']>>;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    openai = await startFakeOpenAI({ apiKey: 'sk-metrics-test-0123456789' });
    // The worker's registry, as runtime/services.ts builds it (the DLQ count under the worker's login).
    registry = createRegistry();
    metrics = createMetrics(registry);
    registerDlqDepth(registry, (timeoutMs) => deadLetterDepth(h.workerSql, timeoutMs), h.appDeps.log);
    worker = await h.startWorker({ metrics });
    http = await startWorkerHttp({
      host: '127.0.0.1',
      port: 0,
      registry,
      ready: () => worker.worker.getState() === 'RUNNING',
      log: h.appDeps.log,
    });
  });
  afterAll(async () => {
    await http?.close();
    await h?.close();
    await Promise.all([telegram?.close(), tools?.close(), openai?.close()]);
  });

  const post = (
    app: { request: Harness['app']['request'] },
    t: SeededTelegram,
    update: unknown,
    secret?: string,
  ) =>
    app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-telegram-bot-api-secret-token': secret ?? t.webhookSecret,
      },
      body: JSON.stringify(update),
    });

  it('counts webhooks, messages, waits, sends (a 429, a DLQ entry), a tool call, model calls and sweeps', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const secrets: string[] = [t.routeKey, t.tenantId, t.bindingId, t.botToken, t.webhookSecret];
    secrets.push(...['88001', '88002', '88003', '88004', '88005', '88006']);

    // Two messages of one chat; the first one's send is slow, so the second waits for its turn.
    telegram.faults.push({ kind: 'delay', ms: 1500 });
    const first = telegramTextUpdate({ chatId: 88_001, text: 'first' });
    expect((await post(h.app, t, first)).status).toBe(200);
    expect((await post(h.app, t, telegramTextUpdate({ chatId: 88_001, text: 'second' }))).status).toBe(200);
    await waitForFinished(h, t.tenantId, 2, 30_000);
    // A provider's re-delivery, and a request that does not verify.
    expect((await post(h.app, t, first)).status).toBe(200);
    expect((await post(h.app, t, first, `${t.webhookSecret}x`)).status).toBe(401);

    // A 429 with retry_after: the quick send is rate limited, the regular attempt sends it.
    telegram.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });
    expect((await post(h.app, t, telegramTextUpdate({ chatId: 88_002, text: 'flood' }))).status).toBe(200);
    await waitForFinished(h, t.tenantId, 3, 30_000);

    // A blocked bot: the segment is parked in the DLQ after one request, the message fails.
    telegram.blockChat(88_003);
    expect((await post(h.app, t, telegramTextUpdate({ chatId: 88_003, text: 'blocked' }))).status).toBe(200);
    const finished = await waitForFinished(h, t.tenantId, 4, 30_000);
    expect(finished.map((m) => m.status).sort()).toEqual(['failed', 'replied', 'replied', 'replied']);

    // A tool call (scripted agent → the fake tool provider) and its reply.
    tools.acceptTool('create_order');
    const tt = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: {
        rules: [
          {
            match: '^order (\\w+)$',
            tool_call: { name: 'create_order', arguments: { item: '{{1}}' } },
            reply: 'Ordered: {{tool_result}}',
          },
        ],
        default_reply: '?',
      },
      tools: [
        {
          name: 'create_order',
          description: 'Places an order',
          parameters: { type: 'object' },
          endpoint_url: `${tools.url}/tools/create_order`,
          side_effect: true,
          idempotency: 'provider_key',
          receipt_url: `${tools.url}/receipts/{key}`,
        },
      ],
    });
    telegram.addBot(tt.botToken);
    secrets.push(tt.routeKey, tt.tenantId, tt.botToken);
    expect((await post(h.app, tt, telegramTextUpdate({ chatId: 88_004, text: 'order widget' }))).status).toBe(
      200,
    );
    const [toolMsg] = await waitForFinished(h, tt.tenantId, 1, 30_000);
    expect(toolMsg!.status).toBe('replied');

    // Recorded while Temporal is unreachable: one started by the sweeper, one too old (DLQ).
    const down = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500 }) });
    const appDown = newApp({ ...h.appDeps, temporal: down });
    const s1 = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const s2 = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(s1.botToken);
    secrets.push(s1.routeKey, s1.tenantId, s2.routeKey, s2.tenantId);
    expect((await post(appDown, s1, telegramTextUpdate({ chatId: 88_005, text: 'outage' }))).status).toBe(
      200,
    );
    expect((await post(appDown, s2, telegramTextUpdate({ chatId: 88_006, text: 'old' }))).status).toBe(200);
    await down.connection.close().catch(() => undefined);
    await h.sql`update message_event set created_at = now() - interval '2 days' where tenant_id = ${s2.tenantId}`;
    const activities = createActivities({
      sql: h.workerSql,
      secrets: h.secrets,
      log: h.appDeps.log,
      suspendedReply: 'unused',
      workerId: 'metrics-test',
      sendTimeoutMs: 2000,
      temporal: h.temporal,
      taskQueue: h.taskQueue,
      metrics,
    });
    for (const tenantId of [s1.tenantId, s2.tenantId]) {
      await activities.sweep({ unstartedSeconds: 0, maxAgeSeconds: 3600, tenantIds: [tenantId] });
    }
    await waitForFinished(h, s1.tenantId, 1, 30_000);

    // Two remote model calls: a 429, then a reply with its token usage.
    const m = await seedExecution(h.sql, h.secrets, {
      provider: 'openai_compatible',
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
      model: 'gpt-4o-mini-2024-07-18',
    });
    secrets.push(m.tenantId, m.eventId);
    openai.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const turn = { tenantId: m.tenantId, eventId: m.eventId, plan: m.plan, exchanges: [] };
    await expect(activities.modelTurn(turn)).rejects.toThrow(/429|rate/);
    expect(await activities.modelTurn(turn)).toMatchObject({ kind: 'reply' });

    for (const msg of [...(await messagesOf(h, t.tenantId)), toolMsg!])
      secrets.push(msg.event_id, msg.session_id);

    // ---- the API's /metrics
    const apiRes = await h.app.request('/metrics');
    expect(apiRes.status).toBe(200);
    const api = parse(await apiRes.text());
    checkLabels(api, secrets);
    const webhook = (outcome: string) =>
      value(api, 'switchyard_webhook_requests_total', { channel: 'telegram', outcome });
    expect(webhook('recorded')).toBe(5);
    expect(webhook('duplicate')).toBe(1);
    expect(webhook('unverified')).toBe(1);
    expect(webhook('start_failed')).toBe(2);
    expect(
      value(api, 'switchyard_webhook_ack_seconds_count', { channel: 'telegram', outcome: 'recorded' }),
    ).toBe(5);
    const route = '/v1/webhooks/telegram/:route_key';
    const okPosts = { method: 'POST', route, status: '200', ok: 'true' };
    // 6 to the app (5 recorded, 1 duplicate) and 2 to the one whose Temporal was down.
    expect(value(api, 'http_requests_total', okPosts)).toBe(8);
    expect(value(api, 'http_requests_total', { ...okPosts, status: '401', ok: 'false' })).toBe(1);
    expect(value(api, 'http_request_duration_seconds_count', okPosts)).toBe(8);
    // Every route label is a registered pattern.
    const routes = new Set(api.filter((s) => s.labels.route).map((s) => s.labels.route));
    for (const r of routes) expect(r).toMatch(/^(\*|\/[a-z0-9/_:.*-]*)$/);
    expect(routes.has(route)).toBe(true);

    // ---- the worker's HTTP server
    expect((await fetch(`${http.url}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${http.url}/readyz`)).json()).toEqual({ status: 'ready' });
    const scrape = await fetch(`${http.url}/metrics`);
    expect(scrape.headers.get('content-type')).toContain('text/plain');
    const text = await scrape.text();
    const w = parse(text);
    checkLabels(w, secrets);
    if (process.env.TEST_PRINT_METRICS)
      console.log(
        text
          .split('\n')
          .filter((l) => l.startsWith('switchyard_') && !l.includes('_bucket'))
          .join('\n'),
      );

    const finishedAs = (status: string, outcome: string) =>
      value(w, 'switchyard_messages_finished_total', { status, outcome });
    // Replied, whichever step sent the last segment (message_finish reports the stored outcome,
    // migration 0025): the outcome is known, never `unreported`.
    expect(finishedAs('replied', 'none')).toBe(5);
    expect(finishedAs('replied', 'unreported')).toBe(0);
    expect(finishedAs('failed', 'delivery_failed')).toBe(1);
    expect(finishedAs('failed', 'start_expired')).toBe(1);
    expect(value(w, 'switchyard_message_reply_seconds_count', { channel: 'telegram' })).toBe(5);
    expect(value(w, 'switchyard_execution_wait_seconds_count', { permit_limited: 'false' })).toBe(6);
    expect(value(w, 'switchyard_execution_waits_total', { reason: 'session_order' })).toBeGreaterThanOrEqual(
      1,
    );

    const sends = (result: string) =>
      value(w, 'switchyard_segment_sends_total', { channel: 'telegram', result });
    expect(sends('sent')).toBe(5);
    expect(sends('rate_limited')).toBe(1);
    expect(sends('failed')).toBe(1);
    expect(sends('retryable') + sends('unknown')).toBe(0);
    expect(value(w, 'switchyard_segment_send_seconds_count', { channel: 'telegram', result: 'sent' })).toBe(
      5,
    );

    expect(value(w, 'switchyard_tool_dispatches_total', { result: 'accepted' })).toBe(1);
    expect(value(w, 'switchyard_tool_dispatch_seconds_count', { result: 'accepted' })).toBe(1);
    expect(value(w, 'switchyard_tool_invocations_total', { outcome: 'accepted' })).toBe(1);

    const model = { provider: 'openai_compatible', model_family: 'gpt-4o' };
    expect(
      value(w, 'switchyard_model_calls_total', {
        ...model,
        outcome: 'retryable_error',
        reason_class: 'rate_limited',
      }),
    ).toBe(1);
    expect(
      value(w, 'switchyard_model_calls_total', { ...model, outcome: 'reply', reason_class: 'none' }),
    ).toBe(1);
    expect(value(w, 'switchyard_model_call_seconds_count', { ...model, outcome: 'reply' })).toBe(1);
    expect(value(w, 'switchyard_model_tokens_total', { ...model, direction: 'input' })).toBeGreaterThan(0);
    expect(value(w, 'switchyard_model_tokens_total', { ...model, direction: 'output' })).toBeGreaterThan(0);

    expect(
      value(w, 'switchyard_sweeper_actions_total', { action: 'started', reason_class: 'never_started' }),
    ).toBe(1);
    expect(
      value(w, 'switchyard_sweeper_actions_total', {
        action: 'dead_lettered',
        reason_class: 'start_expired',
      }),
    ).toBe(1);

    // Across tenants (other test files share the database): at least this test's own letters.
    expect(value(w, 'switchyard_dlq_depth', { kind: 'segment' })).toBeGreaterThanOrEqual(1);
    expect(value(w, 'switchyard_dlq_depth', { kind: 'execution' })).toBeGreaterThanOrEqual(1);
    expect(w.some((s) => s.name === 'switchyard_dlq_depth' && s.labels.kind === 'tool')).toBe(true);
    // The process metrics are on the same registry.
    expect(w.some((s) => s.name === 'process_cpu_user_seconds_total')).toBe(true);
  }, 120_000);

  it('a housekeeping run counts what it removed, by part', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    await h.sql`insert into rate_limit_window (tenant_id, window_start, count)
                values (${t.tenantId}, now() - interval '1 hour', 1)`;
    const before = parse(await registry.metrics());
    const removedBefore =
      value(before, 'switchyard_housekeeping_removed_total', { part: 'rate_limit_windows' }) ?? 0;
    const runs = (m: ReturnType<typeof parse>, outcome: string) =>
      value(m, 'switchyard_housekeeping_runs_total', { outcome }) ?? 0;
    const run = housekeepingActivities({
      sql: h.workerSql,
      log: h.appDeps.log,
      metrics,
    } as unknown as ActivityDeps);
    const report = await run.housekeep();
    const after = parse(await registry.metrics());
    // The run is counted once, under its outcome: audit_refused when any tenant's retention was
    // refused — in this shared database housekeeping.test.ts leaves such a tenant on purpose.
    const outcome = report.auditRefused > 0 ? 'audit_refused' : 'ok';
    expect(runs(after, outcome)).toBe(runs(before, outcome) + 1);
    expect(runs(after, outcome === 'ok' ? 'audit_refused' : 'ok')).toBe(
      runs(before, outcome === 'ok' ? 'audit_refused' : 'ok'),
    );
    // (Another file's housekeeping may prune the seeded window first: then both sides are 0.)
    expect(value(after, 'switchyard_housekeeping_removed_total', { part: 'rate_limit_windows' })).toBe(
      removedBefore + report.rateLimitWindows,
    );
    for (const part of ['audit_rows', 'security_events', 'replay_guards']) {
      expect(
        after.some((x) => x.name === 'switchyard_housekeeping_removed_total' && x.labels.part === part),
      ).toBe(true);
    }
  });

  it('a DLQ count slower than its timeout is cancelled in the database, not left running', async () => {
    // Hold a lock the count must wait for, as a long scan or a blocked table would make it wait.
    const lock = await holdLock(h.sql, (tx) => tx`lock table dead_letter in access exclusive mode`);
    try {
      const started = Date.now();
      await expect(deadLetterDepth(h.workerSql, 300)).rejects.toMatchObject({ code: '57014' });
      expect(Date.now() - started).toBeLessThan(5_000);
      const waiting = await h.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where query like '%dead_letter_depth()%' and state = 'active' and pid <> pg_backend_pid()`;
      expect(waiting[0]!.n).toBe(0);
    } finally {
      await lock.release();
    }
  });

  it('the worker HTTP server: readiness follows the worker and draining; nothing else is served', async () => {
    expect((await fetch(`${http.url}/readyz`)).status).toBe(200);
    expect(value(parse(await registry.metrics()), 'switchyard_worker_ready', {})).toBe(1);
    expect((await fetch(`${http.url}/metrics`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${http.url}/admin`)).status).toBe(404);
    http.setDraining();
    const res = await fetch(`${http.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'draining' });
    expect(value(parse(await registry.metrics()), 'switchyard_worker_ready', {})).toBe(0);
    // Liveness and metrics still answer while it drains.
    expect((await fetch(`${http.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${http.url}/metrics`)).status).toBe(200);
  });

  it('a DLQ count that fails leaves the gauge out of that scrape, never the scrape', async () => {
    const r = createRegistry();
    registerDlqDepth(
      r,
      () =>
        Promise.reject(
          Object.assign(new Error('function dead_letter_depth() does not exist'), { code: '42883' }),
        ),
      h.appDeps.log,
    );
    const samples = parse(await r.metrics());
    expect(samples.some((s) => s.name === 'switchyard_dlq_depth')).toBe(false);
    expect(samples.some((s) => s.name === 'process_cpu_user_seconds_total')).toBe(true);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

// The entry point itself (bin/worker.sh → bin/worker.ts, in its own process: Runtime.install is
// process-wide):
// its HTTP server and the Temporal SDK's own Prometheus exporter on their configured ports.
describe('npm run worker serves /metrics, /healthz, /readyz and the Temporal SDK metrics', () => {
  let child: ChildProcess | undefined;
  let temporal: Client | undefined;
  const taskQueue = `metrics-entry-${process.pid}-${Date.now()}`;

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.on('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    if (temporal) {
      for (const id of [sweeperScheduleId(taskQueue), housekeepingScheduleId(taskQueue)])
        await temporal.schedule
          .getHandle(id)
          .delete()
          .catch(() => undefined);
      await temporal.connection.close();
    }
  });

  it('answers on both ports once the worker runs', async () => {
    const [workerPort, temporalPort] = [await freePort(), await freePort()];
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
    child = spawn('sh', [join(import.meta.dirname, '../../bin/worker.sh')], {
      env: {
        ...env,
        DATABASE_URL: testLoginUrl(inject('databaseUrl'), 'worker'),
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEMPORAL_TASK_QUEUE: taskQueue,
        SWITCHYARD_MASTER_KEY: TEST_MASTER_KEY,
        SWITCHYARD_WORKER_PORT: String(workerPort),
        SWITCHYARD_TEMPORAL_METRICS_PORT: String(temporalPort),
        // Its Schedules must not fire while it runs (they are deleted afterwards).
        SWITCHYARD_SWEEP_EVERY_S: '3600',
        SWITCHYARD_HOUSEKEEPING_EVERY_S: '86400',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    temporal = new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
    let output = '';
    child.stdout?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    await waitFor(() => output.includes('worker running') || child?.exitCode !== null, {
      timeoutMs: 90_000,
      label: 'the worker process to run',
    });
    expect(child.exitCode, output).toBeNull();

    const base = `http://127.0.0.1:${workerPort}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'ready' });
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toContain('# TYPE switchyard_messages_finished_total counter');
    expect(text).toMatch(/^switchyard_dlq_depth\{kind="segment"\} \d+$/m);
    expect(text).toContain('process_cpu_user_seconds_total');

    // Core's exporter: poller and slot metrics appear once the worker polls.
    let core = '';
    await waitFor(
      async () => {
        core = await fetch(`http://127.0.0.1:${temporalPort}/metrics`)
          .then((r) => r.text())
          .catch(() => '');
        return /^temporal_\w+/m.test(core);
      },
      { timeoutMs: 30_000, label: 'Temporal SDK metrics' },
    );
    expect(core).toMatch(new RegExp(`task_queue="${taskQueue}"`));
    if (process.env.TEST_PRINT_METRICS) console.log(core.split('\n').slice(0, 40).join('\n'));

    const exited = new Promise<number | null>((r) => child!.on('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 150_000);
});
