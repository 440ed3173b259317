import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { startMessageWorkflow } from '../../lib/workflow-start';
import { type ChatCompletionRequest, type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type AdminTenant, api, configurationOf, ok, tenantPath } from '../helpers/admin';
import {
  activitiesOf,
  createOpenAIProfile,
  invocationsOfTenant,
  publishRevision,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Reset- and replay-safe tools, tenant permits as rows, a DLQ retry that keeps the chat's order,
// and long waits that continue as new: the parts of "every message reaches an end" that an
// operator's everyday actions (a reset in the Web UI, a manual tool decision, a retry) exercise.

describe('reset-safe tools, permits, ordered retries, bounded waits', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let openai: FakeOpenAI;

  const tool = (name: string, receipts = true) => ({
    name,
    description: `${name} (test tool)`,
    parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
    endpoint_url: `${tools.url}/tools/${name}`,
    side_effect: true,
    idempotency: 'provider_key',
    ...(receipts ? { receipt_url: `${tools.url}/receipts/{key}` } : {}),
  });
  const rule = (name: string, label: string) => ({
    match: `^${name} (\\S+)$`,
    tool_call: { name, arguments: { ref: '{{1}}' } },
    reply: `${label} {{1}}`,
  });
  const seed = async (opts: { maxConcurrentExecutions?: number } = {}) => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      tools: [tool('book'), tool('fax', false)],
      scripted: {
        rules: [rule('book', 'Booked'), rule('fax', 'Faxed')],
        default_reply: 'You said: {{text}}',
      },
      ...opts,
    });
    telegram.addBot(t.botToken);
    return t;
  };
  const texts = (chatId: number) => telegram.sentTo(chatId).map((m) => m.text);
  const permitsOf = async (tenantId: string) =>
    (await h.sql`select event_id from execution_permit where tenant_id = ${tenantId}`).length;
  /** The fax provider answers 500 (not applied) and has no receipt URL: the call goes to an operator. */
  const faxFails = () =>
    tools.setFaultPlan((r) =>
      r.endpoint === 'tool' && r.tool === 'fax' ? { kind: 'status', status: 500 } : undefined,
    );
  const resolve = (tenantId: string, invocationId: string) =>
    api(h.app, 'POST', tenantPath(tenantId, `/tool-invocations/${invocationId}/resolution`), {
      body: { outcome: 'accepted', reason: 'confirmed by phone', provider_receipt: { sent: true } },
    });

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    openai = await startFakeOpenAI();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await tools?.close();
    await openai?.close();
  });

  it('reset to the first workflow task after an accepted tool: one effect, one reply, the tool never re-dispatched', async () => {
    const t = await seed();
    const admin = { ...t, adminKey: TEST_ADMIN_TOKEN, modelProfileId: '' } as unknown as AdminTenant;
    const profile = await createOpenAIProfile(h.app, admin, {
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
    });
    await publishRevision(
      h.app,
      { ...admin, modelProfileId: profile.model_profile_id },
      { tools: [tool('book')] },
    );
    // A model whose tool-call ids differ on every call; its answer after the tool is slow.
    const toolResultOf = (req: ChatCompletionRequest) => req.messages.find((m) => m.role === 'tool');
    openai.setResponder((req) => {
      const result = toolResultOf(req);
      if (result) return `Done: ${String(result.content)}`;
      return { toolCalls: [{ id: `call_${randomUUID()}`, name: 'book', arguments: { ref: 'Z-1' } }] };
    });
    let completions = 0;
    openai.setFaultPlan((r) =>
      r.path?.includes('chat/completions') && ++completions === 2 ? { kind: 'delay', ms: 3000 } : undefined,
    );
    const chat = 72_001;
    await sendText(h, t, chat, 'please book');
    await waitFor(() => tools.effects.length === 1 && completions >= 2, {
      label: 'tool applied, second turn in flight',
    });
    const m = await waitForMessage(h.sql, t.tenantId, 'please book', () => true);
    const handle = h.temporal.workflow.getHandle(m.workflow_id);
    const history = await handle.fetchHistory();
    const firstTask = history.events!.find((e) => e.workflowTaskCompletedEventAttributes)!;
    const { runId } = await handle.describe();
    await h.temporal.workflowService.resetWorkflowExecution({
      namespace: 'default',
      workflowExecution: { workflowId: m.workflow_id, runId },
      workflowTaskFinishEventId: firstTask.eventId,
      requestId: randomUUID(),
      reason: 'test: operator reset to the first workflow task',
    });

    await waitForMessage(h.sql, t.tenantId, 'please book', (x) => x.status === 'replied', 60_000);
    await new Promise((r) => setTimeout(r, 3500)); // the reset-away run's slow answer arrives, and is dropped
    expect(tools.effects).toHaveLength(1);
    expect(tools.requests.filter((r) => r.endpoint === 'tool')).toHaveLength(1);
    const sent = texts(chat);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.startsWith('Done: ')).toBe(true);
    // The reset run rebuilt the turn from the recorded call: no tool activity at all in its history,
    // and the model saw the recorded result.
    expect((await handle.describe()).runId).not.toBe(runId);
    expect(await activitiesOf(h, m.workflow_id)).not.toHaveProperty('invokeTool');
    const last = openai.completions.at(-1)!.request;
    expect(JSON.parse(String(toolResultOf(last)!.content))).toEqual(
      tools.effects[0] && tools.receipt(tools.effects[0].key),
    );
    openai.setResponder(undefined);
    openai.setFaultPlan(undefined);
  }, 90_000);

  it('raising max_concurrent_executions wakes the waiter it admits, not waiting for the holder to finish', async () => {
    const t = await seed({ maxConcurrentExecutions: 1 });
    tools.setFaultPlan((r) =>
      r.endpoint === 'tool' && r.body?.ref === 'C-1' ? { kind: 'delay', ms: 8_000 } : undefined,
    );
    await sendText(h, t, 72_411, 'book C-1');
    await waitFor(() => tools.requests.some((r) => r.endpoint === 'tool' && r.body?.ref === 'C-1'), {
      label: 'C-1 holds the only permit',
    });
    await sendText(h, t, 72_412, 'hello there');
    const waiting = await waitForMessage(h.sql, t.tenantId, 'hello there', () => true);
    await waitFor(
      async () =>
        (
          await h.sql<{ asked: boolean }[]>`
            select permit_requested_at is not null as asked from message_event
            where tenant_id = ${t.tenantId} and event_id = ${waiting.event_id}`
        )[0]?.asked === true,
      { label: 'the second waits for a permit' },
    );
    const tenant = await ok(api(h.app, 'GET', tenantPath(t.tenantId, '')));
    await ok(
      api(h.app, 'PUT', tenantPath(t.tenantId, '/configuration'), {
        body: configurationOf(tenant, { max_concurrent_executions: 2 }),
      }),
    );
    // Answered while the first still holds its permit (its tool call takes 8 s).
    await waitForMessage(h.sql, t.tenantId, 'hello there', (m) => m.status === 'replied', 5_000);
    expect((await waitForMessage(h.sql, t.tenantId, 'book C-1', () => true)).status).toBe('running');
    await waitForMessage(h.sql, t.tenantId, 'book C-1', (m) => m.status === 'replied', 30_000);
    tools.setFaultPlan(undefined);
  }, 60_000);

  it('max_concurrent_executions = 1 with a call parked on an operator: other sessions answered, permits in arrival order', async () => {
    const t = await seed({ maxConcurrentExecutions: 1 });
    faxFails();
    await sendText(h, t, 72_101, 'fax F-1');
    const [parked] = await waitFor(
      async () => (await invocationsOfTenant(h.sql, t.tenantId)).some((i) => i.status === 'manual'),
      { label: 'fax parked on an operator' },
    ).then(() => invocationsOfTenant(h.sql, t.tenantId));
    await waitFor(async () => (await permitsOf(t.tenantId)) === 0, { label: 'its permit given back' });

    // The parked execution no longer holds the tenant's only permit: another session is answered.
    await sendText(h, t, 72_102, 'hello');
    await waitForMessage(h.sql, t.tenantId, 'hello', (m) => m.status === 'replied');

    // A slow execution holds the permit while four more arrive: they run in arrival order.
    tools.setFaultPlan((r) =>
      r.endpoint === 'tool' && r.tool === 'book' ? { kind: 'delay', ms: 2500 } : undefined,
    );
    await sendText(h, t, 72_103, 'book B-1');
    await waitForMessage(h.sql, t.tenantId, 'book B-1', (m) => m.status === 'running');
    const order = ['m4', 'm5', 'm6', 'm7'];
    for (const [i, text] of order.entries()) await sendText(h, t, 72_104 + i, text);
    for (const text of ['book B-1', ...order])
      await waitForMessage(h.sql, t.tenantId, text, (m) => m.status === 'replied', 60_000);
    const commits = await h.sql<{ text: string }[]>`
      select e.payload->>'text' as text from message_event e
      where e.tenant_id = ${t.tenantId} and e.payload->>'text' in ${h.sql(order)}
      order by e.committed_at`;
    expect(commits.map((c) => c.text)).toEqual(order);

    // The operator's decision: the parked execution takes a permit again and finishes.
    tools.setFaultPlan(undefined);
    const res = await resolve(t.tenantId, parked!.invocation_id);
    expect(res.status, res.text).toBe(200);
    await waitForMessage(h.sql, t.tenantId, 'fax F-1', (m) => m.status === 'replied', 30_000);
    expect(texts(72_101)).toEqual(['Faxed F-1']);
    expect(
      tools.requests.filter((r) => r.endpoint === 'tool' && r.key === parked!.idempotency_key),
    ).toHaveLength(1);
    expect(await permitsOf(t.tenantId)).toBe(0);
  }, 120_000);

  it('an approval that times out while parked: the execution waits for a permit again before it goes on', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      maxConcurrentExecutions: 1,
      tools: [tool('book'), { ...tool('refund'), requires_approval: true, approval_timeout_s: 2 }],
      scripted: {
        rules: [rule('book', 'Booked'), rule('refund', 'Refunded')],
        default_reply: 'You said: {{text}}',
      },
    });
    telegram.addBot(t.botToken);
    await sendText(h, t, 72_401, 'refund A-1');
    await waitFor(
      async () =>
        (await invocationsOfTenant(h.sql, t.tenantId)).some((i) => i.status === 'awaiting_approval'),
      { label: 'parked for approval' },
    );
    await waitFor(async () => (await permitsOf(t.tenantId)) === 0, { label: 'its permit given back' });
    // Another execution takes the permit and holds it past the approval's deadline.
    tools.setFaultPlan((r) =>
      r.endpoint === 'tool' && r.tool === 'book' ? { kind: 'delay', ms: 4000 } : undefined,
    );
    await sendText(h, t, 72_402, 'book P-1');
    await waitForMessage(h.sql, t.tenantId, 'book P-1', (m) => m.status === 'running');
    for (const text of ['book P-1', 'refund A-1'])
      await waitForMessage(
        h.sql,
        t.tenantId,
        text,
        (m) => m.status === 'replied' || m.status === 'failed',
        30_000,
      );
    tools.setFaultPlan(undefined);
    // The timed-out call was answered only after the other execution gave its permit back.
    const commits = await h.sql<{ text: string }[]>`
      select payload->>'text' as text from message_event where tenant_id = ${t.tenantId} order by committed_at`;
    expect(commits.map((c) => c.text)).toEqual(['book P-1', 'refund A-1']);
    expect(texts(72_401)[0]).toMatch(/^Refunded A-1/);
    expect(tools.requests.filter((r) => r.endpoint === 'tool' && r.tool === 'refund')).toHaveLength(0);
  }, 60_000);

  it('two dead letters of one chat: retrying the second while the first is reopened is refused', async () => {
    const t = await seed();
    const chat = 72_501;
    telegram.blockChat(chat);
    await sendText(h, t, chat, 'first blocked');
    await waitForMessage(h.sql, t.tenantId, 'first blocked', (m) => m.status === 'failed');
    await sendText(h, t, chat, 'second blocked');
    await waitForMessage(h.sql, t.tenantId, 'second blocked', (m) => m.status === 'failed');
    const letters = await h.sql<{ dead_letter_id: string; text: string }[]>`
      select d.dead_letter_id, e.payload->>'text' as text from dead_letter d
      join message_event e on e.tenant_id = d.tenant_id and e.event_id = d.event_id
      where d.tenant_id = ${t.tenantId} order by e.event_seq`;
    expect(letters.map((l) => l.text)).toEqual(['first blocked', 'second blocked']);
    // The first retry's delivery is held (the chat still blocked, so it is retried for a while).
    const retry = (id: string) =>
      api(h.app, 'POST', tenantPath(t.tenantId, `/dead-letters/${id}/retry`), {
        body: { reason: 'unblocked' },
      });
    telegram.setFaultPlan((r) =>
      String(r.chatId) === String(chat) ? { kind: 'status', status: 500 } : undefined,
    );
    telegram.unblockChat(chat);
    expect((await retry(letters[0]!.dead_letter_id)).status).toBe(202);
    const refused = await retry(letters[1]!.dead_letter_id);
    expect([refused.status, refused.body.error.code]).toEqual([409, 'invalid_transition']);
    expect(refused.body.error.details).toHaveProperty('earlier_event_seq');
    telegram.setFaultPlan(undefined);
    await waitForMessage(h.sql, t.tenantId, 'first blocked', (m) => m.status === 'replied', 30_000);
    expect((await retry(letters[1]!.dead_letter_id)).status).toBe(202);
    await waitForMessage(h.sql, t.tenantId, 'second blocked', (m) => m.status === 'replied', 30_000);
    expect(texts(chat)).toEqual(['You said: first blocked', 'You said: second blocked']);
  }, 60_000);

  it('a DLQ retry while a later message of the chat is running is refused, then delivered after it', async () => {
    const t = await seed();
    const chat = 72_201;
    telegram.blockChat(chat);
    await sendText(h, t, chat, 'hello blocked');
    const blocked = await waitForMessage(h.sql, t.tenantId, 'hello blocked', (m) => m.status === 'failed');
    telegram.unblockChat(chat);
    const [dl] = await h.sql<{ dead_letter_id: string }[]>`
      select dead_letter_id from dead_letter where tenant_id = ${t.tenantId} and event_id = ${blocked.event_id}`;

    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: 4000 } : undefined));
    await sendText(h, t, chat, 'book Y-1');
    const later = await waitForMessage(h.sql, t.tenantId, 'book Y-1', (m) => m.status === 'running');
    const path = tenantPath(t.tenantId, `/dead-letters/${dl!.dead_letter_id}/retry`);
    const refused = await api(h.app, 'POST', path, { body: { reason: 'user unblocked the bot' } });
    expect([refused.status, refused.body.error.code]).toEqual([409, 'invalid_transition']);
    expect(refused.body.error.details).toMatchObject({ later_event_id: later.event_id });
    const [still] =
      await h.sql`select status from dead_letter where tenant_id = ${t.tenantId} and dead_letter_id = ${dl!.dead_letter_id}`;
    expect(still).toEqual({ status: 'open' });
    expect((await waitForMessage(h.sql, t.tenantId, 'hello blocked', () => true)).status).toBe('failed');

    await waitForMessage(h.sql, t.tenantId, 'book Y-1', (m) => m.status === 'replied');
    tools.setFaultPlan(undefined);
    const retried = await api(h.app, 'POST', path, { body: { reason: 'user unblocked the bot' } });
    expect(retried.status, retried.text).toBe(202);
    await waitForMessage(h.sql, t.tenantId, 'hello blocked', (m) => m.status === 'replied');
    expect(texts(chat)).toEqual(['Booked Y-1', 'You said: hello blocked']);
  }, 60_000);

  it('a long wait for an operator continues as new within its history budget and still finishes once', async () => {
    const t = await seed();
    faxFails();
    // Recorded while Temporal is unreachable (acknowledged), then started with short waits.
    const down = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500 }) });
    const res = await newApp({ ...h.appDeps, temporal: down }).request(
      `/v1/webhooks/telegram/${t.routeKey}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
        body: JSON.stringify(telegramTextUpdate({ chatId: 72_301, text: 'fax W-1' })),
      },
    );
    expect(res.status).toBe(200);
    await down.connection.close().catch(() => undefined);
    const m = await waitForMessage(h.sql, t.tenantId, 'fax W-1', () => true);
    await startMessageWorkflow(h.temporal, {
      workflowId: m.workflow_id,
      taskQueue: h.taskQueue,
      input: {
        tenantId: t.tenantId,
        eventId: m.event_id,
        channel: 'telegram',
        waits: { historyBudget: 40, manualRecheckMs: 200 },
      },
    });
    const handle = h.temporal.workflow.getHandle(m.workflow_id);
    const firstRun = (await handle.describe()).runId;
    const runs = new Set<string>([firstRun]);
    await waitFor(
      async () => {
        runs.add((await handle.describe()).runId);
        return runs.size >= 3;
      },
      { timeoutMs: 45_000, label: 'two continue-as-new while waiting' },
    );
    expect((await h.temporal.workflow.getHandle(m.workflow_id, firstRun).describe()).status.name).toBe(
      'CONTINUED_AS_NEW',
    );
    for (const run of runs) {
      const length = (await h.temporal.workflow.getHandle(m.workflow_id, run).describe()).historyLength;
      expect(length).toBeLessThan(80);
    }

    tools.setFaultPlan(undefined);
    const [inv] = await invocationsOfTenant(h.sql, t.tenantId);
    expect(inv!.status).toBe('manual');
    expect((await resolve(t.tenantId, inv!.invocation_id)).status).toBe(200);
    await waitForMessage(h.sql, t.tenantId, 'fax W-1', (x) => x.status === 'replied', 30_000);
    expect(texts(72_301)).toEqual(['Faxed W-1']);
    expect(
      tools.requests.filter((r) => r.endpoint === 'tool' && r.key === inv!.idempotency_key),
    ).toHaveLength(1);
  }, 90_000);
});
