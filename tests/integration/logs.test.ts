import { node } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { temporalLogger } from '../../runtime/temporal-logger';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { capturingLogger } from '../helpers/log-capture';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Spans of this process, in memory; the Node provider brings the async context manager that keeps
// the webhook's span active across its awaits (as NodeSDK does in production).
const spans = new InMemorySpanExporter();
new node.NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }).register();

describe('logs', () => {
  let h: Harness;
  let telegram: FakeTelegram;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
  });

  const webhook = (app: Harness['app'], routeKey: string, body: unknown, secret: string, query = '') =>
    app.request(`/v1/webhooks/telegram/${routeKey}${query}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-telegram-bot-api-secret-token': secret,
        'x-request-id': 'client-abc-1',
      },
      body: JSON.stringify(body),
    });

  it('one access line per request: method, route pattern, status, duration, ids; no route key, query or body', async () => {
    const { log, lines } = capturingLogger();
    const app = newApp({ ...h.appDeps, log });
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const text = 'a private message body';

    const ok = await webhook(
      app,
      t.routeKey,
      telegramTextUpdate({ chatId: 7001, text }),
      t.webhookSecret,
      '?q=sekrit',
    );
    const bad = await webhook(app, t.routeKey, telegramTextUpdate({ chatId: 7001, text }), 'wrong-secret');
    expect([ok.status, bad.status]).toEqual([200, 401]);

    const access = lines.filter((l) => l.msg === 'http request');
    expect(access).toHaveLength(2);
    expect(access[0]).toMatchObject({
      level: 30,
      method: 'POST',
      route: '/v1/webhooks/telegram/:route_key',
      status: 200,
      request_id: ok.headers.get('x-request-id'),
      client_request_id: 'client-abc-1',
      tenant_id: t.tenantId,
    });
    expect(typeof access[0]!.duration_ms).toBe('number');
    // Written after the request's span ended, the access line still names its trace.
    const [row] = await h.sql<{ trace_id: string }[]>`
      select trace_id from message_event where tenant_id = ${t.tenantId}`;
    expect(access[0]!.trace_id).toBe(row!.trace_id);
    expect(access[1]!.trace_id).toMatch(/^[0-9a-f]{32}$/);
    // The failed verification never trusted a tenant.
    expect(access[1]).toMatchObject({ status: 401, request_id: bad.headers.get('x-request-id') });
    expect(access[1]).not.toHaveProperty('tenant_id');

    const all = JSON.stringify(lines);
    expect(all).not.toContain(t.routeKey);
    expect(all).not.toContain('sekrit');
    expect(all).not.toContain(text);
    expect(all).not.toContain(t.webhookSecret);
  });

  it('lines logged inside a request carry its request_id, its trace ids and, once verified, its tenant_id', async () => {
    const { log, lines } = capturingLogger();
    // A namespace that does not exist: the workflow start fails and the webhook logs why (the
    // message is recorded; the sweeper starts it later).
    const temporal = new Client({ connection: h.temporal.connection, namespace: 'no-such-namespace' });
    const app = newApp({ ...h.appDeps, temporal, log });
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });

    const res = await webhook(
      app,
      t.routeKey,
      telegramTextUpdate({ chatId: 7002, text: 'hi' }),
      t.webhookSecret,
    );
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id');
    const inner = lines.filter((l) => l.msg !== 'http request');
    expect(inner.length).toBeGreaterThan(0);
    // …and, logged inside the webhook's span, its trace and span ids.
    const span = spans.getFinishedSpans().find((s) => s.attributes['switchyard.request_id'] === requestId);
    expect(span).toBeDefined();
    for (const l of inner)
      expect(l).toMatchObject({
        request_id: requestId,
        tenant_id: t.tenantId,
        trace_id: span!.spanContext().traceId,
        span_id: expect.stringMatching(/^[0-9a-f]{16}$/),
      });

    // Admin: the tenant a route acts on is named once the principal may act on it.
    const admin = await app.request(`/v1/admin/tenants/${t.tenantId}/secrets`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    expect(admin.status).toBe(200);
    expect(lines.at(-1)).toMatchObject({
      msg: 'http request',
      route: '/v1/admin/tenants/:tenant_id/secrets',
      status: 200,
      tenant_id: t.tenantId,
      request_id: admin.headers.get('x-request-id'),
    });
  });

  it("an activity's lines carry tenant_id, event_id, workflow_id and the activity", async () => {
    const { log, lines } = capturingLogger();
    await h.startWorker({ log });
    // A Telegram of its own: the 429 below must meet this message's quick first send, not a
    // retry of another test's send on the shared fake.
    const own = await startFakeTelegram();
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: own.url });
    own.addBot(t.botToken);
    // The quick first send meets a 429: the activity logs that the regular attempts take over.
    own.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });

    const res = await webhook(
      h.app,
      t.routeKey,
      telegramTextUpdate({ chatId: 7003, text: 'hello' }),
      t.webhookSecret,
    );
    expect(res.status).toBe(200);
    const [row] = await h.sql<{ event_id: string; workflow_id: string }[]>`
      select event_id, workflow_id from message_event where tenant_id = ${t.tenantId}`;
    await own.waitForSent(1, 30_000);
    await own.close();
    await waitFor(() => lines.some((l) => l.tenant_id === t.tenantId), {
      timeoutMs: 30_000,
      label: 'an activity line',
    });

    const mine = lines.filter((l) => l.tenant_id === t.tenantId);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.find((l) => l.msg.startsWith('quick first send did not settle'))).toMatchObject({
      tenant_id: t.tenantId,
      event_id: row!.event_id,
      workflow_id: row!.workflow_id,
      activity: 'startExecution',
    });
    // Activity lines are not request lines.
    for (const l of mine) expect(l).not.toHaveProperty('request_id');
  });

  it('the Temporal SDK logger adapter maps levels and meta onto pino', () => {
    const { log, lines } = capturingLogger();
    const adapter = temporalLogger(log);
    adapter.trace('t', { a: 1 });
    adapter.debug('d');
    adapter.info('i', { sdkComponent: 'worker', taskQueue: 'q' });
    adapter.warn('w', { workflowId: 'wf-1' });
    adapter.error('e', { error: 'boom' });
    adapter.log('WARN', 'via log', { b: 2, token: 'never-logged' });

    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [10, 't'],
      [20, 'd'],
      [30, 'i'],
      [40, 'w'],
      [50, 'e'],
      [40, 'via log'],
    ]);
    for (const l of lines) expect(l.component).toBe('temporal');
    expect(lines[0]).toMatchObject({ a: 1 });
    expect(lines[2]).toMatchObject({ sdkComponent: 'worker', taskQueue: 'q' });
    expect(lines[3]).toMatchObject({ workflowId: 'wf-1' });
    expect(lines[5]).toMatchObject({ b: 2, token: '[redacted]' });
  });

  it('redacts secret keys at the top level and nested', () => {
    const { log, lines } = capturingLogger();
    log.info(
      {
        token: 's1',
        binding: { bot_token: 's2', secret: { webhook_secret_token: 's3' } },
        headers: { authorization: 's4', 'x-telegram-bot-api-secret-token': 's5' },
        req: { headers: { authorization: 's6', 'x-telegram-bot-api-secret-token': 's7' } },
        provider: { api_key: 's8', oauth: { access_token: 's9' } },
        wecom: { corp_secret: 's10', encoding_aes_key: 's11' },
        sealed: { key: 's12', value: 's13' },
        tenant_id: 't_kept',
      },
      'secrets',
    );
    const line = JSON.stringify(lines[0]);
    for (let i = 1; i <= 13; i++) expect(line).not.toContain(`"s${i}"`);
    expect(lines[0]).toMatchObject({ tenant_id: 't_kept', token: '[redacted]' });
  });
});
