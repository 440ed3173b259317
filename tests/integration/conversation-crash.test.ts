import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChatCompletionRequest, type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import type { AdminTenant } from '../helpers/admin';
import { createOpenAIProfile, publishRevision, sendText } from '../helpers/execution-flow';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';
import { waitFor } from '../helpers/wait';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

// Policy collect across a worker crash (issue #15): three messages within a second are merged into
// one turn; the worker running that turn's model call is killed (SIGKILL: no drain, no cleanup,
// its workflow cache and its in-flight call gone). Another worker takes over once the model
// activity's heartbeat times out (10 s, workflows/options.ts): still one reply for all three, and
// every message replied, merged into the turn.

/** The user texts the model is asked to answer: the user messages after the last reply. */
function pendingTexts(req: ChatCompletionRequest): string[] {
  const out: string[] = [];
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i]!;
    if (m.role !== 'user') break;
    out.unshift(typeof m.content === 'string' ? m.content : '');
  }
  return out;
}

describe('collect survives a worker SIGKILL', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let openai: FakeOpenAI;
  let child: WorkerProcess | undefined;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    openai = await startFakeOpenAI();
    openai.setResponder((req) => `re: ${pendingTexts(req).join(' + ')}`);
  });
  afterAll(async () => {
    await child?.kill('SIGKILL');
    await h?.close();
    await telegram?.close();
    await openai?.close();
  });

  it('3 messages within 1 s, the worker killed during the merged call → one reply, three rows replied and merged', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const admin = { ...t, adminKey: TEST_ADMIN_TOKEN, modelProfileId: '' } as unknown as AdminTenant;
    const profile = await createOpenAIProfile(h.app, admin, {
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
    });
    await publishRevision(
      h.app,
      { ...admin, modelProfileId: profile.model_profile_id },
      { conversation: { policy: 'collect', debounce_ms: 300 } },
    );
    const calls = () =>
      openai.requests.filter(
        (r) => r.endpoint === 'chat.completions' && JSON.stringify(r.body ?? {}).includes('k-one'),
      );

    // The first model call is "slow": held until after the kill, so it is in flight when it happens.
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    let held = 0;
    openai.setFaultPlan((r) => {
      if (r.endpoint !== 'chat.completions' || held > 0) return undefined;
      held++;
      return { kind: 'hold_until', until: () => released };
    });
    child = await startWorkerProcess(h.taskQueue);
    const chat = 93_001;
    const sentAt = Date.now();
    for (const text of ['k-one', 'k-two', 'k-three']) await sendText(h, t, chat, text);
    expect(Date.now() - sentAt).toBeLessThan(1000);
    try {
      await waitFor(() => calls().length === 1, {
        label: 'the merged turn calls the model',
        timeoutMs: 30_000,
      });
      expect(pendingTexts(calls()[0]!.body as never)).toEqual(['k-one', 'k-two', 'k-three']);
      await child.kill('SIGKILL');
      child = undefined;
    } finally {
      openai.setFaultPlan(undefined);
      release();
    }
    const [head] = await h.sql<{ status: string }[]>`
      select status from message_event where tenant_id = ${t.tenantId} order by event_seq limit 1`;
    expect(head!.status).toBe('running');
    expect(telegram.sentTo(chat)).toEqual([]);

    // The surviving worker takes the turn over after the killed attempt's heartbeat timed out.
    await h.startWorker();
    const rows = () =>
      h.sql<
        { event_id: string; text: string; status: string; merged_into: string | null; workflow_id: string }[]
      >`
        select event_id, payload->>'text' as text, status, merged_into, workflow_id
        from message_event where tenant_id = ${t.tenantId} order by event_seq`;
    await waitFor(async () => (await rows()).every((m) => m.status === 'replied' || m.status === 'failed'), {
      label: 'all three finished',
      timeoutMs: 60_000,
    });
    const done = await rows();
    const turn = done[0]!.event_id;
    expect(done.map((m) => [m.text, m.status, m.merged_into])).toEqual([
      ['k-one', 'replied', turn],
      ['k-two', 'replied', turn],
      ['k-three', 'replied', turn],
    ]);
    // What the user sees: one reply, covering all three.
    expect(telegram.sentTo(chat).map((m) => m.text)).toEqual(['re: k-one + k-two + k-three']);
    // The killed call never answered; the takeover asked once more, with all three.
    expect(calls().map((c) => pendingTexts(c.body as never))).toEqual([
      ['k-one', 'k-two', 'k-three'],
      ['k-one', 'k-two', 'k-three'],
    ]);
    const usage = await h.sql`select 1 from usage_event where tenant_id = ${t.tenantId}`;
    expect(usage).toHaveLength(1);
    // Every message's run ends (the merged ones' as soon as they saw the merge).
    await waitFor(
      async () => {
        for (const m of done) {
          const d = await h.temporal.workflow.getHandle(m.workflow_id).describe();
          if (d.status.name !== 'COMPLETED') return false;
        }
        return true;
      },
      { label: 'every run completed', timeoutMs: 30_000 },
    );
    // Nothing more arrives later (a second reply from a late run would show here).
    await new Promise((r) => setTimeout(r, 1000));
    expect(telegram.sentTo(chat)).toHaveLength(1);
  }, 150_000);
});
