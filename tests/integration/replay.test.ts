import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newApp } from '../../api/app';
import { startMessageWorkflow } from '../../lib/workflow-start';
import type { sweeperWorkflow } from '../../workflows/sweeper';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { sweepNow } from '../helpers/sweep';
import { waitFor } from '../helpers/wait';

const HISTORIES = join(import.meta.dirname, '../fixtures/histories');
const RECORD = process.env.RECORD_HISTORIES === '1';

// Determinism guard: saved histories of every workflow type replay against the current workflow
// code. A change that would break running executions fails here before it reaches a worker.
// Re-record on purpose (RECORD_HISTORIES=1 npx vitest run tests/integration/replay.test.ts) only
// when a change is versioned (patched()) or no old execution can still be running. Histories of
// earlier workflow code stay, renamed (`*.before-0018.json`: before the commit sent the first
// segment itself), so the current code is checked against both. Since 0020 the workflow changes are
// versioned with patched() (bounded waits, a permit taken again after an operator's decision); the
// histories recorded with them sit beside the older ones, which must keep replaying. Record only
// the new ones with -t (e.g. -t "records repair").
describe('workflow replay over saved histories', () => {
  it('every saved history replays without a nondeterminism error', async () => {
    const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThanOrEqual(11);
    const histories = files.map((f) => ({
      workflowId: f,
      history: JSON.parse(readFileSync(join(HISTORIES, f), 'utf8')) as unknown,
    }));
    const results = [];
    for await (const r of Worker.runReplayHistories(
      { workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') } },
      histories,
    )) {
      results.push({ id: r.workflowId, error: r.error ? String(r.error) : null });
    }
    expect(results.filter((r) => r.error)).toEqual([]);
    expect(results).toHaveLength(files.length);
  });
});

describe.runIf(RECORD)('record histories', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await tools?.close();
  });

  async function runAndSave(
    name: string,
    t: Awaited<ReturnType<typeof seedTelegramTenant>>,
    text: string,
    chatId: number,
  ) {
    telegram.addBot(t.botToken);
    const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(telegramTextUpdate({ chatId, text })),
    });
    expect(res.status).toBe(200);
    const [row] = await h.sql<
      { workflow_id: string }[]
    >`select workflow_id from message_event where tenant_id = ${t.tenantId}`;
    const handle = h.temporal.workflow.getHandle(row!.workflow_id);
    await handle.result();
    saveHistory(name, row!.workflow_id);
  }

  function saveHistory(name: string, workflowId: string) {
    // The CLI writes the canonical JSON history format that historyFromJSON reads.
    const cli = execFileSync('bash', [join(import.meta.dirname, '../../temporal-dev.sh'), 'path'], {
      encoding: 'utf8',
    }).trim();
    const json = execFileSync(
      cli,
      ['workflow', 'show', '-w', workflowId, '-o', 'json', '--address', inject('temporalAddress')],
      {
        encoding: 'utf8',
      },
    );
    writeFileSync(join(HISTORIES, `${name}.json`), json);
  }

  it('records a plain reply, a tool call with a multi-segment reply, and a suspended fallback', async () => {
    await runAndSave(
      'message-scripted-reply',
      await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url }),
      'hello',
      9101,
    );
    const tool = {
      name: 'lookup',
      description: 'looks something up',
      parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
      endpoint_url: `${tools.url}/tools/lookup`,
      side_effect: true,
      idempotency: 'provider_key',
      receipt_url: `${tools.url}/receipts/{key}`,
    };
    const withTool = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      tools: [tool],
      scripted: {
        rules: [
          {
            match: '^find (.+)$',
            tool_call: { name: 'lookup', arguments: { q: '{{1}}' } },
            reply: `${'x'.repeat(5000)} {{tool_result}}`,
          },
        ],
        default_reply: 'no',
      },
    });
    await runAndSave('message-tool-call-two-segments', withTool, 'find cats', 9102);
    await runAndSave(
      'message-suspended-fallback',
      await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url, tenantStatus: 'suspended' }),
      'hi',
      9103,
    );
    await waitFor(() => telegram.sent.length >= 4);
  });

  it('records repair: a manual wait that continues as new and takes its permit again, a repair run, a sweeper run', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      maxConcurrentExecutions: 1,
      tools: [
        {
          name: 'fax',
          description: 'sends a fax',
          parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
          endpoint_url: `${tools.url}/tools/fax`,
          side_effect: true,
          idempotency: 'provider_key',
        },
      ],
      scripted: {
        rules: [
          {
            match: '^fax (.+)$',
            tool_call: { name: 'fax', arguments: { to: '{{1}}' } },
            reply: 'Faxed {{1}}',
          },
        ],
        default_reply: 'You said: {{text}}',
      },
    });
    telegram.addBot(t.botToken);
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'status', status: 500 } : undefined));
    const down = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500 }) });
    await newApp({ ...h.appDeps, temporal: down }).request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(telegramTextUpdate({ chatId: 9105, text: 'fax +47 1234' })),
    });
    await down.connection.close().catch(() => undefined);
    const [m] = await h.sql<{ workflow_id: string; event_id: string }[]>`
      select workflow_id, event_id from message_event where tenant_id = ${t.tenantId}`;
    await startMessageWorkflow(h.temporal, {
      workflowId: m!.workflow_id,
      taskQueue: h.taskQueue,
      input: {
        tenantId: t.tenantId,
        eventId: m!.event_id,
        channel: 'telegram',
        waits: { historyBudget: 40, manualRecheckMs: 200 },
      },
    });
    const handle = h.temporal.workflow.getHandle(m!.workflow_id);
    const firstRun = (await handle.describe()).runId;
    await waitFor(async () => (await handle.describe()).runId !== firstRun, { timeoutMs: 30_000 });
    const cli = execFileSync('bash', [join(import.meta.dirname, '../../temporal-dev.sh'), 'path'], {
      encoding: 'utf8',
    }).trim();
    const show = (workflowId: string, runId?: string) =>
      execFileSync(
        cli,
        [
          'workflow',
          'show',
          '-w',
          workflowId,
          ...(runId ? ['-r', runId] : []),
          '-o',
          'json',
          '--address',
          inject('temporalAddress'),
        ],
        { encoding: 'utf8' },
      );
    writeFileSync(join(HISTORIES, 'message-manual-wait-continued.json'), show(m!.workflow_id, firstRun));
    tools.setFaultPlan(undefined);
    const [inv] = await h.sql<{ invocation_id: string }[]>`
      select invocation_id from tool_invocation where tenant_id = ${t.tenantId}`;
    const res = await h.app.request(
      `/v1/admin/tenants/${t.tenantId}/tool-invocations/${inv!.invocation_id}/resolution`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ outcome: 'accepted', reason: 'confirmed' }),
      },
    );
    expect(res.status).toBe(200);
    await handle.result();
    saveHistory('message-manual-wait-resumed', m!.workflow_id);

    // A reply pending when its workflow was terminated: the repair run delivers it.
    telegram.setFaultPlan((r) => (String(r.chatId) === '9106' ? { kind: 'status', status: 500 } : undefined));
    const t2 = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t2.botToken);
    await h.app.request(`/v1/webhooks/telegram/${t2.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t2.webhookSecret },
      body: JSON.stringify(telegramTextUpdate({ chatId: 9106, text: 'repair me' })),
    });
    let first = '';
    await waitFor(async () => {
      const [r] = await h.sql<{ workflow_id: string; status: string }[]>`
        select workflow_id, status from message_event where tenant_id = ${t2.tenantId}`;
      first = r?.workflow_id ?? '';
      // Between attempts (not mid-send: a send in flight would make its outcome unknown).
      const [o] = await h.sql<{ status: string }[]>`
        select status from reply_outbox where tenant_id = ${t2.tenantId} and attempts >= 2`;
      return r?.status === 'reply_pending' && o?.status === 'retryable';
    });
    await h.temporal.workflow.getHandle(first).terminate('recording a repair');
    telegram.setFaultPlan(undefined);
    const report = await sweepNow(h, [t2.tenantId], { staleSeconds: 0 });
    expect(report.repaired).toBe(1);
    const [r2] = await h.sql<{ workflow_id: string }[]>`
      select workflow_id from message_event where tenant_id = ${t2.tenantId}`;
    await h.temporal.workflow.getHandle(r2!.workflow_id).result();
    saveHistory('message-repair-run', r2!.workflow_id);

    const sweeper = await h.temporal.workflow.start<typeof sweeperWorkflow>('sweeperWorkflow', {
      workflowId: `record-sweeper-${Date.now()}`,
      taskQueue: h.taskQueue,
      args: [{ runForMs: 1500, passIntervalMs: 500, options: { tenantIds: [t2.tenantId] } }],
    });
    await sweeper.result();
    saveHistory('sweeper-run', sweeper.workflowId);
  }, 120_000);

  it('records an operator DLQ retry (deliveryRetryWorkflow)', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    telegram.blockChat('9104');
    await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(telegramTextUpdate({ chatId: 9104, text: 'blocked for now' })),
    });
    let deadLetterId = '';
    await waitFor(async () => {
      const [dl] = await h.sql<
        { dead_letter_id: string }[]
      >`select dead_letter_id from dead_letter where tenant_id = ${t.tenantId}`;
      deadLetterId = dl?.dead_letter_id ?? '';
      return deadLetterId !== '';
    });
    telegram.unblockChat('9104');
    const res = await h.app.request(`/v1/admin/tenants/${t.tenantId}/dead-letters/${deadLetterId}/retry`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'chat unblocked' }),
    });
    expect(res.status).toBe(202);
    const { retry_workflow_id: workflowId } = (await res.json()) as { retry_workflow_id: string };
    await h.temporal.workflow.getHandle(workflowId).result();
    saveHistory('delivery-retry', workflowId);
  });

  it('records conversation policy collect: a debounced turn that merges, and the message merged into it', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const [profile] = await h.sql<{ model_profile_id: string }[]>`
      select model_profile_id from model_profile where tenant_id = ${t.tenantId}`;
    const as = { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const created = await h.app.request(`/v1/admin/tenants/${t.tenantId}/apps/${t.appId}/revisions`, {
      method: 'POST',
      headers: as,
      body: JSON.stringify({
        model_profile_id: profile!.model_profile_id,
        system_prompt: 'You are helpful.',
        scripted: { rules: [], default_reply: 'You said: {{text}}' },
        conversation: { policy: 'collect', debounce_ms: 500 },
      }),
    });
    expect(created.status).toBe(201);
    const published = await h.app.request(`/v1/admin/tenants/${t.tenantId}/apps/${t.appId}/publish`, {
      method: 'POST',
      headers: as,
      body: JSON.stringify({ revision: 2, expected_version: 1 }),
    });
    expect(published.status).toBe(200);
    for (const text of ['first', 'second']) {
      const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
        body: JSON.stringify(telegramTextUpdate({ chatId: 9105, text })),
      });
      expect(res.status).toBe(200);
    }
    const rows = await h.sql<{ workflow_id: string }[]>`
      select workflow_id from message_event where tenant_id = ${t.tenantId} order by event_seq`;
    for (const r of rows) await h.temporal.workflow.getHandle(r.workflow_id).result();
    saveHistory('message-collect-turn', rows[0]!.workflow_id);
    saveHistory('message-collect-merged', rows[1]!.workflow_id);
  });
});
