import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

const HISTORIES = join(import.meta.dirname, '../fixtures/histories');
const RECORD = process.env.RECORD_HISTORIES === '1';

// Determinism guard: saved histories of every workflow type replay against the current workflow
// code. A change that would break running executions fails here before it reaches a worker.
// Re-record on purpose (RECORD_HISTORIES=1 npx vitest run tests/integration/replay.test.ts) only
// when a change is versioned (patched()) or no old execution can still be running. Histories of
// earlier workflow code stay, renamed (`*.before-0018.json`: before the commit sent the first
// segment itself), so the current code is checked against both.
describe('workflow replay over saved histories', () => {
  it('every saved history replays without a nondeterminism error', async () => {
    const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThanOrEqual(4);
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
});
