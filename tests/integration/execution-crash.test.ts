import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import {
  auditOfTenant,
  finished,
  invocationsOfTenant,
  messagesOf,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';
import { waitFor } from '../helpers/wait';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

// A worker process is killed (SIGKILL: no drain, no cleanup) while two tool calls are in flight:
// one the provider applied and is slow to answer, one the provider applied and whose connection
// dropped (its reconciliation by receipt was in flight). Another worker takes over once Temporal
// times the attempts out (the tool activity's StartToClose, 1 minute): both messages are replied
// and each effect exists exactly once at the provider, established by receipt, never resent.
describe('worker killed mid-execution', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let child: WorkerProcess | undefined;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
  });
  afterAll(async () => {
    await child?.kill('SIGKILL');
    await h?.close();
    await telegram?.close();
    await tools?.close();
  });

  it('SIGKILL with a slow call and a dropped call in flight: taken over, replied, each effect applied once', async () => {
    const tool = (name: string) => ({
      name,
      description: `${name} (test tool)`,
      parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
      endpoint_url: `${tools.url}/tools/${name}`,
      side_effect: true,
      idempotency: 'provider_key',
      receipt_url: `${tools.url}/receipts/{key}`,
    });
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      tools: [tool('book'), tool('charge')],
      scripted: {
        rules: [
          {
            match: '^book (\\S+)$',
            tool_call: { name: 'book', arguments: { ref: '{{1}}' } },
            reply: 'Booked {{1}}: {{tool_result}}',
          },
          {
            match: '^charge (\\S+)$',
            tool_call: { name: 'charge', arguments: { ref: '{{1}}' } },
            reply: 'Charged {{1}}: {{tool_result}}',
          },
        ],
        default_reply: '?',
      },
    });
    telegram.addBot(t.botToken);

    // book: applied at once, answered only after the kill. charge: applied, connection dropped, and
    // its receipt lookup hangs. The child's HTTP timeout is long, so both stay in flight.
    const seen = { book: false, charge: false, receipt: false };
    tools.setFaultPlan((r) => {
      if (r.endpoint === 'tool' && r.tool === 'book' && !seen.book) {
        seen.book = true;
        return { kind: 'delay', ms: 30_000 };
      }
      if (r.endpoint === 'tool' && r.tool === 'charge' && !seen.charge) {
        seen.charge = true;
        return { kind: 'apply_then_drop' };
      }
      if (r.endpoint === 'receipt' && !seen.receipt) {
        seen.receipt = true;
        return { kind: 'timeout', ms: 30_000 };
      }
      return undefined;
    });
    child = await startWorkerProcess(h.taskQueue, { TEST_SEND_TIMEOUT_MS: '20000' });
    await sendText(h, t, 64_001, 'book R-1');
    await sendText(h, t, 64_002, 'charge C-2');
    await waitFor(() => seen.book && seen.receipt, { timeoutMs: 30_000, label: 'both calls in flight' });
    expect(tools.effects.map((e) => e.tool).sort()).toEqual(['book', 'charge']);

    await child.kill('SIGKILL');
    child = undefined;
    tools.setFaultPlan(undefined);
    const rows = await invocationsOfTenant(h.sql, t.tenantId);
    expect(rows.map((r) => [r.tool_name, r.status]).sort()).toEqual([
      ['book', 'dispatching'],
      ['charge', 'reconciling'],
    ]);
    expect(tools.requests.some((r) => r.endpoint === 'tool' && r.status !== undefined)).toBe(false);

    // The surviving worker takes over after the attempts time out.
    await h.startWorker();
    for (const text of ['book R-1', 'charge C-2'])
      await waitForMessage(h.sql, t.tenantId, text, finished, 120_000);
    expect((await messagesOf(h.sql, t.tenantId)).map((m) => m.status)).toEqual(['replied', 'replied']);

    const invocations = await invocationsOfTenant(h.sql, t.tenantId);
    for (const name of ['book', 'charge']) {
      const inv = invocations.find((i) => i.tool_name === name)!;
      // Dispatched once (one claim of `prepared`), then reconciled under the takeover's newer fence.
      expect(inv).toMatchObject({ status: 'accepted', attempts: 1, fencing_token: 2 });
      expect(tools.effectCount(inv.idempotency_key)).toBe(1);
      expect(tools.requests.filter((r) => r.endpoint === 'tool' && r.tool === name)).toHaveLength(1);
      const receipt = tools.receipt(inv.idempotency_key)!;
      const [chatId, ref, label] = name === 'book' ? [64_001, 'R-1', 'Booked'] : [64_002, 'C-2', 'Charged'];
      const sent = telegram.sentTo(chatId).map((m) => m.text);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.startsWith(`${label} ${ref}: `)).toBe(true);
      expect(JSON.parse(sent[0]!.slice(`${label} ${ref}: `.length))).toEqual(receipt);
    }
    // The outcome was established by the surviving worker, by receipt.
    const accepted = (await auditOfTenant(h.sql, t.tenantId)).filter(
      (a) => a.action === 'tool.invocation' && a.decision === 'accepted',
    );
    expect(accepted).toHaveLength(2);
    for (const a of accepted) {
      expect(a.details).toMatchObject({ reconciled: true });
      expect(a.actor_id.startsWith('child-')).toBe(false);
    }
  }, 180_000);
});
