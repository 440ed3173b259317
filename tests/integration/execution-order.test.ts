import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const TOOL_DELAY_MS = 150;

// Per-session FIFO and tenant concurrency across two worker processes: every message calls a
// side-effecting tool that takes TOOL_DELAY_MS, so overlapping executions would show up as
// overlapping tool calls at the provider.
describe('execution order: per-session FIFO, parallel sessions, tenant concurrency', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let second: WorkerProcess;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    tools.setFaultPlan(() => ({ kind: 'delay', ms: TOOL_DELAY_MS }));
    await h.startWorker();
    second = await startWorkerProcess(h.taskQueue);
  });
  afterAll(async () => {
    await second?.kill('SIGTERM');
    await h?.close();
    await telegram?.close();
    await tools?.close();
  });

  it('5 sessions × 20 interleaved messages, 2 workers: one execution per session at a time, in event_seq order, at most max_concurrent_executions', async () => {
    const maxConcurrent = 3;
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      maxConcurrentExecutions: maxConcurrent,
      scripted: {
        rules: [
          {
            match: '^(c\\d+) n(\\d+)$',
            tool_call: { name: 'record', arguments: { chat: '{{1}}', n: '{{2}}' } },
            reply: 'done {{2}}',
          },
        ],
        default_reply: '?',
      },
      tools: [
        {
          name: 'record',
          description: 'records a message',
          parameters: {
            type: 'object',
            properties: { chat: { type: 'string' }, n: { type: 'string' } },
            required: ['chat', 'n'],
          },
          endpoint_url: `${tools.url}/tools/record`,
          side_effect: true,
          idempotency: 'provider_key',
          receipt_url: `${tools.url}/receipts/{key}`,
        },
      ],
    });
    telegram.addBot(t.botToken);
    const chats = [8001, 8002, 8003, 8004, 8005];
    const updates = Array.from({ length: 20 }, (_, n) =>
      chats.map((chatId) => telegramTextUpdate({ chatId, text: `c${chatId} n${n}` })),
    ).flat();
    for (let i = 0; i < updates.length; i += 10) {
      const batch = await Promise.all(
        updates.slice(i, i + 10).map((u) =>
          h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-telegram-bot-api-secret-token': t.webhookSecret,
            },
            body: JSON.stringify(u),
          }),
        ),
      );
      expect(batch.map((r) => r.status).every((s) => s === 200)).toBe(true);
    }

    await waitFor(
      () =>
        telegram.sent.filter((m) => chats.map(String).includes(String(m.chatId))).length >= updates.length,
      {
        timeoutMs: 120_000,
        label: 'all replies',
      },
    );

    const calls = tools.requests
      .filter((r) => r.method === 'POST')
      .map((r) => ({
        at: r.at,
        chat: (r.body as { chat: string }).chat,
        n: Number((r.body as { n: string }).n),
      }));
    expect(calls).toHaveLength(100);
    // Concurrent posts may be recorded in any order; event_seq is the order that must hold.
    const recorded = await h.sql<{ chat: string; n: number }[]>`
      select payload->>'chatId' as chat, split_part(payload->>'text', ' n', 2)::int as n
      from message_event where tenant_id = ${t.tenantId} order by session_id, event_seq`;
    for (const chatId of chats) {
      const order = recorded.filter((r) => r.chat === String(chatId)).map((r) => r.n);
      expect(order).toHaveLength(20);
      // Replies arrive in event order, each exactly once.
      expect(telegram.sentTo(String(chatId)).map((m) => m.text)).toEqual(order.map((n) => `done ${n}`));
      // The session's tool calls happen in event order and never overlap in time.
      const mine = calls.filter((c) => c.chat === `c${chatId}`);
      expect(mine.map((c) => c.n)).toEqual(order);
      for (let i = 1; i < mine.length; i++)
        expect(mine[i]!.at - mine[i - 1]!.at).toBeGreaterThanOrEqual(TOOL_DELAY_MS - 5);
    }
    // Sessions progressed in parallel, and never more than maxConcurrent executions at once.
    const overlaps = calls.map(
      (c) => calls.filter((o) => o.at <= c.at && o.at + TOOL_DELAY_MS - 10 > c.at).length,
    );
    expect(Math.max(...overlaps)).toBeGreaterThan(1);
    expect(Math.max(...overlaps)).toBeLessThanOrEqual(maxConcurrent);
    // Every tool effect was applied exactly once.
    expect(new Set(tools.effects.map((e) => e.key)).size).toBe(100);
    expect(tools.effects).toHaveLength(100);
  }, 180_000);
});
