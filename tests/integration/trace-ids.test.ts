import { node } from '@opentelemetry/sdk-node';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Client } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { messageStartFacts, workflowFactsOf } from '../../db/queries/workflow-facts';
import { withTenantTx } from '../../db/tx';
import { startMessageWorkflow } from '../../lib/workflow-start';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { api, createTenant, uniqueKey } from '../helpers/admin';
import { sealNow } from '../helpers/audit';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';

// Trace ids are stored where an operator looks first: the message row and the audit rows of one
// message carry the trace of the webhook that brought it, an admin mutation's audit row the trace
// of its request. And the Temporal Web UI names each message workflow without user text.

// Spans of this process, in memory; the Node provider brings the async context manager that keeps
// the webhook's span active across its awaits (as NodeSDK does in production).
const spans = new InMemorySpanExporter();
new node.NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }).register();

const spansNamed = (name: string): ReadableSpan[] => spans.getFinishedSpans().filter((s) => s.name === name);

describe('trace ids on message and audit rows; workflow summary in the Web UI', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let app: ReturnType<typeof newApp>;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    // The API's Temporal client as runtime/temporal.ts builds it with tracing on.
    const traced = new Client({
      connection: h.temporal.connection,
      namespace: 'default',
      interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
    });
    app = newApp({ ...h.appDeps, temporal: traced, metrics: new Registry() });
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
  });

  it("a webhook's trace id is on its message row and on the audit rows its execution writes", async () => {
    // A call of a tool the revision does not allow: refused, never sent, and audited by TypeScript.
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: {
        rules: [{ match: '^trace', tool_call: { name: 'not_allowed', arguments: {} }, reply: 'traced' }],
        default_reply: '?',
      },
    });
    telegram.addBot(t.botToken);
    const text = 'trace me 7e1f';
    const res = await app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(telegramTextUpdate({ chatId: 515151, fromId: 626262, text })),
    });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id');

    const [row] = await h.sql<{ event_id: string; workflow_id: string; trace_id: string | null }[]>`
      select event_id, workflow_id, trace_id from message_event where tenant_id = ${t.tenantId}`;
    const webhook = spansNamed('webhook telegram').find(
      (s) => s.attributes['switchyard.request_id'] === requestId,
    );
    expect(webhook).toBeDefined();
    const traceId = webhook!.spanContext().traceId;
    expect(row!.trace_id).toBe(traceId);
    // The workflow start continued the same trace (the client interceptor's span).
    expect(
      spans
        .getFinishedSpans()
        .some((s) => s.name.startsWith('StartWorkflow') && s.spanContext().traceId === traceId),
    ).toBe(true);

    const handle = h.temporal.workflow.getHandle(row!.workflow_id);
    expect(await handle.result()).toMatchObject({ status: 'replied' });
    await telegram.waitForSent(1, 30_000);

    // The refusal's entry is written by TypeScript (activities/audit-runtime.ts), the finish by the
    // SQL step functions (execution_audit_finished, migration 0025): both carry the message's trace.
    await sealNow(h.sql, t.tenantId);
    const audits = await h.sql<{ action: string; decision: string; trace_id: string | null }[]>`
      select action, decision, trace_id from audit_log where tenant_id = ${t.tenantId} order by seq`;
    expect(audits.map((a) => [a.action, a.decision, a.trace_id])).toEqual([
      ['tool.invocation', 'refused', traceId],
      ['message.finished', 'replied', traceId],
    ]);

    // The Web UI's summary and details: channel, tenant, session kind, event and app; no user text,
    // no external user or chat id.
    const desc = await handle.describe();
    const summary = await desc.staticSummary();
    const details = await desc.staticDetails();
    expect(summary).toBe(`telegram · ${t.tenantId} · direct`);
    expect(details).toContain(row!.event_id);
    expect(details).toContain(t.appId);
    expect(details).toContain('Session kind: direct');
    for (const secretish of [text, '515151', '626262', t.routeKey, t.botToken]) {
      expect(summary).not.toContain(secretish);
      expect(details).not.toContain(secretish);
    }
  });

  it("an admin mutation's audit row carries its request span's trace id", async () => {
    const tenant = await createTenant(app);
    const res = await app.request(`/v1/admin/tenants/${tenant.tenant_id}/secrets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.appDeps.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: uniqueKey('s'), purpose: 'tool_credential', value: 'v' }),
    });
    expect(res.status).toBe(201);
    const requestId = res.headers.get('x-request-id');
    const span = spansNamed('admin POST').find((s) => s.attributes['switchyard.request_id'] === requestId);
    expect(span).toBeDefined();
    expect(span!.attributes['http.response.status_code']).toBe(201);

    const rows = await h.sql<{ action: string; trace_id: string | null }[]>`
      select action, trace_id from audit_log where tenant_id = ${tenant.tenant_id} and request_id = ${requestId}`;
    expect(rows.length).toBe(1);
    expect(rows[0]!.trace_id).toBe(span!.spanContext().traceId);

    // A failed request still ends its span, with its status.
    const denied = await api(app, 'GET', `/v1/admin/tenants/${tenant.tenant_id}`, { token: null });
    expect(denied.status).toBe(401);
    expect(spansNamed('admin GET').some((s) => s.attributes['http.response.status_code'] === 401)).toBe(true);
  });

  it('a later start (sweeper, operator) names what it knows: tenant key, session kind, app and revision', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const res = await app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(
        telegramTextUpdate({ chatId: 737373, text: 'later start', chatType: 'supergroup' }),
      ),
    });
    expect(res.status).toBe(200);
    const [row] = await h.sql<{ event_id: string; workflow_id: string; trace_id: string }[]>`
      select event_id, workflow_id, trace_id from message_event where tenant_id = ${t.tenantId}`;
    await h.temporal.workflow.getHandle(row!.workflow_id).result();
    const [tenant] = await h.sql<{ tenant_key: string }[]>`
      select tenant_key from tenant where tenant_id = ${t.tenantId}`;

    // The worker's role reads the message's facts but not the tenant table; the admin's reads both.
    const asWorker = await withTenantTx(
      h.workerSql,
      { role: 'tenant_app_writer', tenantId: t.tenantId },
      (tx) => messageStartFacts(tx, { tenantId: t.tenantId, eventId: row!.event_id }),
    );
    expect(asWorker).toMatchObject({ session_kind: 'group', app_id: t.appId, tenant_key: null });
    expect(asWorker!.trace_id).toBe(row!.trace_id);
    expect(asWorker!.revision).toEqual(expect.any(Number));
    const asAdmin = await withTenantTx(
      h.apiSql,
      { role: 'tenant_admin_writer', tenantId: t.tenantId },
      (tx) => messageStartFacts(tx, { tenantId: t.tenantId, eventId: row!.event_id, withTenantKey: true }),
    );
    expect(asAdmin!.tenant_key).toBe(tenant!.tenant_key);

    // Started on a queue no worker polls: only its start options are looked at.
    const workflowId = `trace-ids-${Date.now()}`;
    await startMessageWorkflow(h.temporal, {
      workflowId,
      taskQueue: `${h.taskQueue}-idle`,
      input: {
        tenantId: t.tenantId,
        eventId: row!.event_id,
        channel: 'telegram',
        repair: { attempt: 1, reasonClass: 'operator_repair' },
      },
      facts: workflowFactsOf(asAdmin),
    });
    const handle = h.temporal.workflow.getHandle(workflowId);
    try {
      const desc = await handle.describe();
      expect(await desc.staticSummary()).toBe(`telegram · ${tenant!.tenant_key} · group · repair 1`);
      const details = await desc.staticDetails();
      expect(details).toContain(`App revision: ${asAdmin!.revision}`);
      expect(details).toContain('Repair: attempt 1 (operator_repair)');
      expect(details).not.toContain('737373');
      expect(details).not.toContain('later start');
    } finally {
      await handle.terminate('test done');
    }
  });
});
