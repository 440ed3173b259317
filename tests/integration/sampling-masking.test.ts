import { trace } from '@opentelemetry/api';
import { Resource } from '@opentelemetry/resources';
import { node } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Client, Connection } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import type { Worker } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweeperActivities } from '../../activities/sweeper';
import { newApp } from '../../api/app';
import { pseudonymOf } from '../../lib/masking';
import { createWorker } from '../../runtime/worker';
import { SAMPLED, SampledOnlyProcessor, TenantSampler } from '../../telemetry/sampling';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { sealNow } from '../helpers/audit';
import { SUITE_AUDIT_KEY } from '../helpers/db-logins';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { capturingLogger } from '../helpers/log-capture';
import { type SeededTelegram, seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// A tenant's trace_sampling_rate decides, once its webhook verified, whether the request and the
// workflow it starts are traced (telemetry/sampling.ts); requests never trusted are sampled by the
// untrusted rate (0 here). Its log_masking_level decides what logs, spans and audit rows show of the
// message (lib/masking.ts). Audit is never sampled; secrets never appear at any level.

const spans = new InMemorySpanExporter();
new node.NodeTracerProvider({
  sampler: new TenantSampler(0),
  spanProcessors: [new SampledOnlyProcessor(new SimpleSpanProcessor(spans))],
}).register();

const ofTrace = (traceId: string): ReadableSpan[] =>
  spans.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);

describe('per-tenant trace sampling and log masking', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let worker: Worker;
  let running: Promise<void>;
  let app: ReturnType<typeof newApp>;
  let traced: Client;
  const { log, lines } = capturingLogger();

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    traced = new Client({
      connection: h.temporal.connection,
      namespace: 'default',
      interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
    });
    app = newApp({ ...h.appDeps, temporal: traced, log, metrics: new Registry() });
    // A traced worker as bin/worker.ts builds it (its own bundle, with the workflow interceptors).
    worker = await createWorker({
      connection: h.nativeConnection,
      namespace: 'default',
      taskQueue: h.taskQueue,
      telemetry: { exporter: spans, resource: new Resource({}), shutdown: async () => undefined },
      deps: {
        sql: h.workerSql,
        secrets: h.secrets,
        log,
        suspendedReply: 'unavailable',
        workerId: 'w-sampling',
        sendTimeoutMs: 2000,
        temporal: h.temporal,
        taskQueue: h.taskQueue,
      },
    });
    running = worker.run();
  }, 120_000);
  afterAll(async () => {
    if (worker?.getState() === 'RUNNING') worker.shutdown();
    await running;
    await h?.close();
    await telegram?.close();
  });

  async function tenant(rate: number, masking: 'none' | 'basic' | 'strict'): Promise<SeededTelegram> {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    await h.sql`update tenant set trace_sampling_rate = ${rate}, log_masking_level = ${masking}
                where tenant_id = ${t.tenantId}`;
    telegram.addBot(t.botToken);
    return t;
  }

  /** Sends one message and waits for its workflow; returns its row and the request id. */
  async function message(t: SeededTelegram, p: { chatId: number; fromId: number; text: string }) {
    const res = await app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(telegramTextUpdate(p)),
    });
    expect(res.status).toBe(200);
    const [row] = await h.sql<{ event_id: string; workflow_id: string; trace_id: string }[]>`
      select event_id, workflow_id, trace_id from message_event where tenant_id = ${t.tenantId}`;
    expect(await h.temporal.workflow.getHandle(row!.workflow_id).result()).toMatchObject({
      status: 'replied',
    });
    return { row: row!, requestId: res.headers.get('x-request-id')! };
  }

  const auditUsers = async (tenantId: string) => {
    await sealNow(h.sql, tenantId);
    return h.sql<{ action: string; user_id: string | null; trace_id: string | null }[]>`
      select action, user_id, trace_id from audit_log where tenant_id = ${tenantId} and action = 'message.finished'`;
  };

  const recordedLine = (eventId: string) =>
    lines.find((l) => l.msg === 'message recorded' && l.event_id === eventId);

  it('rate 1, masking none: every span of the message, sharing its trace id; text and ids shown', async () => {
    const t = await tenant(1, 'none');
    const { row } = await message(t, { chatId: 4101, fromId: 5101, text: 'plain sight 41' });
    // Workflow spans reach the exporter through a sink, after the workflow task completed.
    await waitFor(() => ofTrace(row.trace_id).some((s) => s.name.startsWith('RunWorkflow')));
    const mine = ofTrace(row.trace_id);
    const names = mine.map((s) => s.name);
    expect(names).toContain('webhook telegram');
    expect(names.some((n) => n.startsWith('StartWorkflow'))).toBe(true);
    expect(names.some((n) => n.startsWith('RunWorkflow'))).toBe(true);
    expect(names.some((n) => n.startsWith('RunActivity'))).toBe(true);

    const webhook = mine.find((s) => s.name === 'webhook telegram')!;
    expect(webhook.attributes['switchyard.message.text']).toBe('plain sight 41');
    expect(webhook.attributes['switchyard.message.sender_id']).toBe('5101');
    expect(webhook.attributes['switchyard.message.chat_id']).toBe('4101');
    expect(recordedLine(row.event_id)).toMatchObject({
      text: 'plain sight 41',
      sender_id: '5101',
      chat_id: '4101',
    });
    expect(await auditUsers(t.tenantId)).toEqual([
      { action: 'message.finished', user_id: '5101', trace_id: row.trace_id },
    ]);
  });

  it('rate 0, masking basic: no span exported, audit unaffected; text masked, ids pseudonymous', async () => {
    const t = await tenant(0, 'basic');
    const { row } = await message(t, { chatId: 4202, fromId: 5202, text: 'hidden words 42' });
    expect(row.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(ofTrace(row.trace_id)).toEqual([]);
    // Audit is never sampled: the finish is there, with the (unexported) trace id.
    const sender = pseudonymOf(SUITE_AUDIT_KEY, t.tenantId, '5202');
    expect(recordedLine(row.event_id)).toMatchObject({
      text: `[masked len=${'hidden words 42'.length}]`,
      sender_id: sender,
      chat_id: pseudonymOf(SUITE_AUDIT_KEY, t.tenantId, '4202'),
      masking: 'basic',
    });
    expect(await auditUsers(t.tenantId)).toEqual([
      { action: 'message.finished', user_id: '5202', trace_id: row.trace_id },
    ]);
    const logged = JSON.stringify(lines);
    expect(logged).not.toContain('hidden words 42');
    expect(logged).not.toContain('5202');
    expect(logged).not.toContain('4202');
  });

  it('rate 1, masking strict: spans and logs show neither text nor ids; the audit user is a pseudonym', async () => {
    const t = await tenant(1, 'strict');
    const { row } = await message(t, { chatId: 4303, fromId: 5303, text: 'secret plans 43' });
    const webhook = ofTrace(row.trace_id).find((s) => s.name === 'webhook telegram')!;
    expect(webhook.attributes['switchyard.message.text']).toBe('[masked]');
    expect(webhook.attributes['switchyard.message.sender_id']).toBe('[masked]');
    expect(recordedLine(row.event_id)).toMatchObject({
      text: '[masked]',
      sender_id: '[masked]',
      chat_id: '[masked]',
    });
    // The database computes the same pseudonym as lib/masking.ts (migration 0027).
    expect(await auditUsers(t.tenantId)).toEqual([
      {
        action: 'message.finished',
        user_id: pseudonymOf(SUITE_AUDIT_KEY, t.tenantId, '5303'),
        trace_id: row.trace_id,
      },
    ]);
    const everything = JSON.stringify(lines) + JSON.stringify(ofTrace(row.trace_id).map((s) => s.attributes));
    expect(everything).not.toContain('secret plans 43');
    expect(everything).not.toContain('5303');
  });

  it('no secret at any level: bot tokens and webhook secrets are in no log line or span', async () => {
    const everything =
      JSON.stringify(lines) + JSON.stringify(spans.getFinishedSpans().map((s) => s.attributes));
    for (const t of await h.sql<{ tenant_id: string }[]>`select tenant_id from tenant`) {
      expect(everything).not.toContain(`${t.tenant_id}:TEST`);
    }
    expect(everything).not.toMatch(/\d+:TEST[0-9a-f]{24}/);
  });

  it('an unverified webhook is sampled at the untrusted rate (0): its span is dropped', async () => {
    const t = await tenant(1, 'none');
    const res = await app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'wrong' },
      body: JSON.stringify(telegramTextUpdate({ chatId: 4404, text: 'forged' })),
    });
    expect(res.status).toBe(401);
    const requestId = res.headers.get('x-request-id');
    expect(spans.getFinishedSpans().some((s) => s.attributes['switchyard.request_id'] === requestId)).toBe(
      false,
    );
  });

  it("admin requests: a tenant key's follow its tenant's rate, the platform token's are kept", async () => {
    const hidden = await tenant(0, 'basic');
    const shown = await tenant(1, 'basic');
    const admin = (method: string, path: string, token: string | null, body?: unknown) =>
      app.request(path, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    const spanOf = (res: Response) =>
      spans
        .getFinishedSpans()
        .find((s) => s.attributes['switchyard.request_id'] === res.headers.get('x-request-id'));
    const keyOf = async (tenantId: string) => {
      const res = await admin('POST', `/v1/admin/tenants/${tenantId}/api-keys`, TEST_ADMIN_TOKEN, {
        role: 'tenant_viewer',
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { key: string }).key;
    };
    const hiddenGet = await admin(
      'GET',
      `/v1/admin/tenants/${hidden.tenantId}/messages`,
      await keyOf(hidden.tenantId),
    );
    const shownGet = await admin(
      'GET',
      `/v1/admin/tenants/${shown.tenantId}/messages`,
      await keyOf(shown.tenantId),
    );
    expect([hiddenGet.status, shownGet.status]).toEqual([200, 200]);
    expect(spanOf(hiddenGet)).toBeUndefined();
    expect(spanOf(shownGet)?.attributes[SAMPLED]).toBe(true);
    const platform = await admin('GET', `/v1/admin/tenants/${hidden.tenantId}`, TEST_ADMIN_TOKEN);
    expect(spanOf(platform)).toBeDefined();
    const denied = await admin('GET', `/v1/admin/tenants/${hidden.tenantId}`, null);
    expect(denied.status).toBe(401);
    expect(spanOf(denied)).toBeUndefined();
  });

  it("a late start by the sweeper follows the tenant's rate: rate 0 untraced, rate 1 in the sweeper's trace", async () => {
    const hidden = await tenant(0, 'basic');
    const shown = await tenant(1, 'basic');
    // Recorded while Temporal is unreachable: the sweeper starts both later.
    const down = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500 }) });
    const appDown = newApp({ ...h.appDeps, temporal: down, metrics: new Registry() });
    for (const [t, chatId] of [
      [hidden, 4801],
      [shown, 4802],
    ] as const) {
      const res = await appDown.request(`/v1/webhooks/telegram/${t.routeKey}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
        body: JSON.stringify(telegramTextUpdate({ chatId, text: 'late start' })),
      });
      expect(res.status).toBe(200);
    }
    await down.connection.close().catch(() => undefined);
    // The sweeper's activity as the worker runs it: a traced client, inside the pass's span.
    const { sweep } = sweeperActivities({
      sql: h.workerSql,
      secrets: h.secrets,
      log,
      suspendedReply: 'unavailable',
      workerId: 'w-sweep',
      sendTimeoutMs: 2000,
      temporal: traced,
      taskQueue: h.taskQueue,
    });
    const passTrace = await trace.getTracer('test').startActiveSpan('sweeper pass', async (span) => {
      const report = await sweep({ unstartedSeconds: 0, tenantIds: [hidden.tenantId, shown.tenantId] });
      expect(report.started).toBe(2);
      span.end();
      return span.spanContext().traceId;
    });
    for (const t of [hidden, shown]) {
      const [row] = await h.sql<{ workflow_id: string }[]>`
        select workflow_id from message_event where tenant_id = ${t.tenantId}`;
      await h.temporal.workflow.getHandle(row!.workflow_id).result();
    }
    await waitFor(() => ofTrace(passTrace).some((s) => s.name.startsWith('RunWorkflow')));
    // Exactly one message's run joined the pass's trace: the rate-1 tenant's.
    const runs = ofTrace(passTrace).filter((s) => s.name.startsWith('StartWorkflow'));
    expect(runs).toHaveLength(1);
    expect(ofTrace(passTrace).filter((s) => s.name.startsWith('RunWorkflow'))).toHaveLength(1);
  });
});
