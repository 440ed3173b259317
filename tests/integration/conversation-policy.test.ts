import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChatCompletionRequest, type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type AdminTenant, api, ok, tenantPath } from '../helpers/admin';
import {
  createOpenAIProfile,
  finished,
  messagesOf,
  publishRevision,
  sendText,
} from '../helpers/execution-flow';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { sweepNow } from '../helpers/sweep';
import { waitFor } from '../helpers/wait';

// The revision's double-texting policy (README "How a message runs"): what a message does while its
// chat's turn runs — enqueue (the default), collect, interrupt, reject — decided by the session
// lane's step functions, so each holds across a terminated workflow and its repair: no message
// lost, none answered twice.

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

/** A 1×1 PNG: the photo a media message carries. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6300010000050001' +
    '0d0a2db40000000049454e44ae426082',
  'hex',
);

interface Row {
  event_id: string;
  text: string;
  status: string;
  outcome: string | null;
  merged_into: string | null;
  workflow_id: string;
}

describe('conversation policy (double texting)', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let openai: FakeOpenAI;
  let tools: FakeToolProvider;

  const rows = (tenantId: string) =>
    h.sql<Row[]>`
      select event_id, payload->>'text' as text, status, outcome, merged_into, workflow_id
      from message_event where tenant_id = ${tenantId} order by event_seq`;
  const texts = (chat: number) => telegram.sentTo(chat).map((m) => m.text);
  const callsFor = (word: string) =>
    openai.requests.filter(
      (r) => r.endpoint === 'chat.completions' && JSON.stringify(r.body ?? {}).includes(word),
    );
  /** Holds the next n model calls until released (the turn is "slow" for as long as the test likes). */
  const holdNextCall = (n = 1) => {
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    let held = 0;
    openai.setFaultPlan((r) => {
      if (r.endpoint !== 'chat.completions' || held >= n) return undefined;
      held++;
      return { kind: 'hold_until', until: () => released };
    });
    return release;
  };
  const repairUntilFinished = (tenantId: string) =>
    waitFor(
      async () => {
        await sweepNow(h, [tenantId], { staleSeconds: 0 });
        return (await rows(tenantId)).every((m) => finished(m as never));
      },
      { timeoutMs: 60_000, label: 'repaired' },
    );
  const allFinished = async (tenantId: string, n: number, timeoutMs = 30_000) => {
    await waitFor(
      async () => {
        const r = await rows(tenantId);
        return r.length === n && r.every((m) => m.status === 'replied' || m.status === 'failed');
      },
      { timeoutMs, label: `${n} messages finished` },
    );
    return rows(tenantId);
  };
  /** Every message's run ends (a merged one's as soon as it sees the merge). */
  const runsEnded = (done: Row[]) =>
    waitFor(
      async () => {
        for (const m of done) {
          const d = await h.temporal.workflow.getHandle(m.workflow_id).describe();
          if (d.status.name !== 'COMPLETED') return false;
        }
        return true;
      },
      { label: 'every run completed', timeoutMs: 10_000 },
    );

  /** A Telegram photo message with a caption, its file served by the fake's getFile. */
  const sendPhoto = async (t: SeededTelegram, chat: number, caption: string) => {
    const fileId = `photo-${randomBytes(4).toString('hex')}`;
    telegram.addFile({ fileId, bytes: PNG });
    const text = telegramTextUpdate({ chatId: chat, text: caption });
    const { text: _text, ...message } = text.message;
    const update = {
      ...text,
      message: {
        ...message,
        caption,
        photo: [{ file_id: fileId, file_unique_id: fileId, width: 1, height: 1, file_size: PNG.length }],
      },
    };
    const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(update),
    });
    expect(res.status).toBe(200);
    return fileId;
  };

  /** A Telegram tenant whose published revision uses the fake OpenAI and this conversation policy. */
  const tenantWith = async (revision: Record<string, unknown>): Promise<SeededTelegram> => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const admin = { ...t, adminKey: TEST_ADMIN_TOKEN, modelProfileId: '' } as unknown as AdminTenant;
    const profile = await createOpenAIProfile(h.app, admin, {
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
    });
    await publishRevision(h.app, { ...admin, modelProfileId: profile.model_profile_id }, revision);
    return t;
  };

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    openai = await startFakeOpenAI();
    tools = await startFakeToolProvider();
    openai.setResponder((req) => `re: ${pendingTexts(req).join(' + ')}`);
    // Media messages' attachments go to the filesystem store (the default backend profile's).
    await h.startWorker({
      artifacts: { dataDir: mkdtempSync(join(tmpdir(), 'switchyard-data-')), trustedEndpoints: [] },
    });
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await openai?.close();
    await tools?.close();
  });

  it('validates the policy on revision create (400, nothing written) and shows it in responses', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const [profile] = await h.sql<{ model_profile_id: string }[]>`
      select model_profile_id from model_profile where tenant_id = ${t.tenantId}`;
    const model_profile_id = profile!.model_profile_id;
    const path = tenantPath(t.tenantId, `/apps/${t.appId}/revisions`);
    const create = (conversation: unknown) =>
      api(h.app, 'POST', path, { body: { model_profile_id, system_prompt: 'Hi.', conversation } });
    for (const bad of [
      { policy: 'sometimes' },
      { policy: 'collect', debounce_ms: 60_001 },
      { policy: 'collect', debounce_ms: -1 },
      { policy: 'collect', debounce_ms: 1.5 },
      { policy: 'reject', busy_reply: '' },
      { policy: 'reject', extra: true },
      {},
      'collect',
    ]) {
      const res = await create(bad);
      expect([res.status, res.body?.error?.code], JSON.stringify(bad)).toEqual([400, 'validation_failed']);
    }
    const [count] = await h.sql<{ n: number }[]>`
      select count(*)::int as n from agent_app_revision where tenant_id = ${t.tenantId}`;
    expect(count!.n).toBe(1);

    const made = await ok(create({ policy: 'collect', debounce_ms: 60_000 }), 201);
    expect(made.conversation).toEqual({ policy: 'collect', debounce_ms: 60_000 });
    const plain = await ok(
      api(h.app, 'POST', path, { body: { model_profile_id, system_prompt: 'Hi.' } }),
      201,
    );
    expect(plain.conversation).toEqual({ policy: 'enqueue' });
    const listed = await ok(api(h.app, 'GET', path));
    expect(listed.items.map((r: { conversation: unknown }) => r.conversation)).toEqual([
      { policy: 'enqueue' },
      { policy: 'collect', debounce_ms: 60_000 },
      { policy: 'enqueue' },
    ]);
  });

  it('collect: three messages within a second → one model call with all three, one reply, all merged', async () => {
    const t = await tenantWith({ conversation: { policy: 'collect', debounce_ms: 800 } });
    const chat = 91_001;
    for (const text of ['c-one', 'c-two', 'c-three']) await sendText(h, t, chat, text);
    const done = await allFinished(t.tenantId, 3);
    const turn = done[0]!.event_id;
    expect(done.map((m) => [m.text, m.status, m.merged_into])).toEqual([
      ['c-one', 'replied', turn],
      ['c-two', 'replied', turn],
      ['c-three', 'replied', turn],
    ]);
    expect(texts(chat)).toEqual(['re: c-one + c-two + c-three']);
    await runsEnded(done);
    const calls = callsFor('c-one');
    expect(calls).toHaveLength(1);
    expect(pendingTexts(calls[0]!.body as unknown as ChatCompletionRequest)).toEqual([
      'c-one',
      'c-two',
      'c-three',
    ]);
    // The admin API shows where each message went.
    const detail = await ok(api(h.app, 'GET', tenantPath(t.tenantId, `/messages/${done[2]!.event_id}`)));
    expect(detail).toMatchObject({ status: 'replied', merged_into: turn, reply_segments: [] });
    const list = await ok(api(h.app, 'GET', tenantPath(t.tenantId, '/messages')));
    expect(list.items.map((m: { merged_into: string | null }) => m.merged_into)).toEqual([turn, turn, turn]);
    // The next message is a turn of its own; the merged turn is in its context (the session summary).
    await sendText(h, t, chat, 'c-four');
    await allFinished(t.tenantId, 4);
    expect(texts(chat)).toEqual(['re: c-one + c-two + c-three', 're: c-four']);
    const next = callsFor('c-four')[0]!.body as unknown as ChatCompletionRequest;
    expect(pendingTexts(next)).toEqual(['c-four']);
    expect(JSON.stringify(next.messages)).toContain('user: c-one c-two c-three');
  }, 30_000);

  it('collect: the turn’s workflow terminated mid-call and repaired → still one reply for all three', async () => {
    const t = await tenantWith({ conversation: { policy: 'collect', debounce_ms: 300 } });
    const chat = 91_002;
    const release = holdNextCall();
    try {
      for (const text of ['k-one', 'k-two', 'k-three']) await sendText(h, t, chat, text);
      await waitFor(() => callsFor('k-one').length === 1, { label: 'the merged turn calls the model' });
      const [head] = await rows(t.tenantId);
      expect(head!.status).toBe('running');
      await h.temporal.workflow.getHandle(head!.workflow_id).terminate('test: worker lost mid-turn');
    } finally {
      openai.setFaultPlan(undefined);
      release();
    }
    await repairUntilFinished(t.tenantId);
    const done = await rows(t.tenantId);
    const turn = done[0]!.event_id;
    expect(done.map((m) => [m.status, m.merged_into])).toEqual([
      ['replied', turn],
      ['replied', turn],
      ['replied', turn],
    ]);
    expect(texts(chat)).toEqual(['re: k-one + k-two + k-three']);
    expect(callsFor('k-two').every((c) => pendingTexts(c.body as never).length === 3)).toBe(true);
  }, 90_000);

  it('collect: a photo sent between two texts is never merged into the earlier turn: it has a turn of its own', async () => {
    const t = await tenantWith({ conversation: { policy: 'collect', debounce_ms: 800 } });
    const chat = 91_008;
    await sendText(h, t, chat, 'p-one');
    const fileId = await sendPhoto(t, chat, 'p-photo');
    await sendText(h, t, chat, 'p-three');
    const done = await allFinished(t.tenantId, 3);
    const photo = done[1]!.event_id;
    // The first turn stops before the photo; the photo's turn takes the text after it.
    expect(done.map((m) => [m.status, m.merged_into])).toEqual([
      ['replied', null],
      ['replied', photo],
      ['replied', photo],
    ]);
    const first = callsFor('p-one')[0]!.body as unknown as ChatCompletionRequest;
    expect(pendingTexts(first)).toEqual(['p-one']);
    expect(texts(chat)).toHaveLength(2);
    expect(texts(chat)[0]).toBe('re: p-one');
    // The photo's own turn fetched it (once) and asked the model about it.
    expect(telegram.downloads.filter((d) => d.includes(fileId))).toHaveLength(1);
    const photoCalls = callsFor('p-photo');
    expect(photoCalls).toHaveLength(1);
    expect(JSON.stringify(photoCalls[0]!.body)).toContain('p-three');
  }, 30_000);

  it('collect: a failed merged turn retried by an operator (DLQ) → every message it answers is replied', async () => {
    const t = await tenantWith({ conversation: { policy: 'collect', debounce_ms: 300 } });
    const chat = 91_009;
    telegram.blockChat(chat);
    try {
      for (const text of ['d-one', 'd-two']) await sendText(h, t, chat, text);
      const failed = await allFinished(t.tenantId, 2);
      expect(failed.map((m) => [m.status, m.merged_into])).toEqual([
        ['failed', failed[0]!.event_id],
        ['failed', failed[0]!.event_id],
      ]);
    } finally {
      telegram.unblockChat(chat);
    }
    const [dl] = await h.sql<{ dead_letter_id: string }[]>`
      select dead_letter_id from dead_letter where tenant_id = ${t.tenantId} and kind = 'segment'`;
    await ok(
      api(h.app, 'POST', tenantPath(t.tenantId, `/dead-letters/${dl!.dead_letter_id}/retry`), {
        body: { reason: 'the user unblocked the bot' },
      }),
      202,
    );
    await waitFor(async () => (await rows(t.tenantId)).every((m) => m.status === 'replied'), {
      label: 'the retried turn and the message merged into it replied',
      timeoutMs: 30_000,
    });
    expect(texts(chat)).toEqual(['re: d-one + d-two']);
    const [merged] = await h.sql<{ failure_reason: string | null; outcome: string | null }[]>`
      select failure_reason, outcome from message_event
      where tenant_id = ${t.tenantId} and payload->>'text' = 'd-two'`;
    expect(merged).toEqual({ failure_reason: null, outcome: null });
  }, 60_000);

  it('interrupt: a second message during a slow model call cancels it; one reply covers both', async () => {
    const t = await tenantWith({ conversation: { policy: 'interrupt' } });
    const chat = 91_003;
    const before = openai.completions.length;
    const release = holdNextCall();
    try {
      await sendText(h, t, chat, 'i-one');
      await waitFor(() => callsFor('i-one').length === 1, { label: 'the first turn calls the model' });
      await sendText(h, t, chat, 'i-two');
      await waitFor(() => texts(chat).length === 1, { label: 'the reply', timeoutMs: 20_000 });
      // The abandoned call is really cancelled: the activity (heartbeating) aborts its request.
      await waitFor(() => callsFor('i-one')[0]!.aborted === true, {
        label: 'the interrupted call aborted',
        timeoutMs: 20_000,
      });
    } finally {
      openai.setFaultPlan(undefined);
      release();
    }
    const done = await allFinished(t.tenantId, 2);
    const turn = done[0]!.event_id;
    expect(done.map((m) => [m.text, m.status, m.merged_into])).toEqual([
      ['i-one', 'replied', turn],
      ['i-two', 'replied', turn],
    ]);
    expect(texts(chat)).toEqual(['re: i-one + i-two']);
    await runsEnded(done);
    // The first call was abandoned (aborted: it never answered), the second saw both messages.
    const calls = callsFor('i-one');
    expect(calls.map((c) => pendingTexts(c.body as never))).toEqual([['i-one'], ['i-one', 'i-two']]);
    await waitFor(() => openai.completions.length >= before + 2, { label: 'the held call released' });
    await new Promise((r) => setTimeout(r, 300));
    expect(texts(chat)).toHaveLength(1);
    // Only the call that answered was billed (an abandoned call that did answer is counted too:
    // model-turn's zombie test).
    const usage = await h.sql`select 1 from usage_event where tenant_id = ${t.tenantId}`;
    expect(usage).toHaveLength(1);
  }, 60_000);

  it('interrupt: a photo during a turn does not stop it (it cannot join): one model call, then the photo’s own turn', async () => {
    const t = await tenantWith({ conversation: { policy: 'interrupt' } });
    const chat = 91_010;
    const release = holdNextCall();
    try {
      await sendText(h, t, chat, 'q-one');
      await waitFor(() => callsFor('q-one').length === 1, { label: 'the turn calls the model' });
      await sendPhoto(t, chat, 'q-photo');
      await waitFor(async () => (await rows(t.tenantId)).length === 2, { label: 'the photo recorded' });
      // Time for a hint (there must be none) to reach the running turn.
      await new Promise((r) => setTimeout(r, 1500));
    } finally {
      openai.setFaultPlan(undefined);
      release();
    }
    const done = await allFinished(t.tenantId, 2);
    expect(done.map((m) => [m.status, m.merged_into])).toEqual([
      ['replied', null],
      ['replied', null],
    ]);
    // The held call was never cancelled and asked again: it answered the turn.
    expect(callsFor('q-one').filter((c) => !JSON.stringify(c.body).includes('q-photo'))).toHaveLength(1);
    expect(texts(chat)[0]).toBe('re: q-one');
    expect(texts(chat)).toHaveLength(2);
  }, 60_000);

  it('interrupt: the interrupted turn’s workflow terminated and repaired → one reply covering both', async () => {
    const t = await tenantWith({ conversation: { policy: 'interrupt' } });
    const chat = 91_007;
    const release = holdNextCall(2);
    try {
      await sendText(h, t, chat, 'x-one');
      await waitFor(() => callsFor('x-one').length === 1, { label: 'the first turn calls the model' });
      await sendText(h, t, chat, 'x-two');
      await waitFor(() => callsFor('x-two').length === 1, { label: 'the turn asks again with both' });
      const [head] = await rows(t.tenantId);
      await h.temporal.workflow.getHandle(head!.workflow_id).terminate('test: worker lost mid-turn');
    } finally {
      openai.setFaultPlan(undefined);
      release();
    }
    await repairUntilFinished(t.tenantId);
    const done = await rows(t.tenantId);
    const turn = done[0]!.event_id;
    expect(done.map((m) => [m.status, m.merged_into])).toEqual([
      ['replied', turn],
      ['replied', turn],
    ]);
    expect(texts(chat)).toEqual(['re: x-one + x-two']);
  }, 90_000);

  it('interrupt after a side-effecting tool call behaves as collect: the effect applied once, two replies', async () => {
    tools.setFaultPlan((r) => (r.method === 'POST' ? { kind: 'delay', ms: 1500 } : undefined));
    const t = await tenantWith({
      conversation: { policy: 'interrupt' },
      tools: [
        {
          name: 'order',
          description: 'places an order',
          parameters: { type: 'object', properties: { item: { type: 'string' } }, required: ['item'] },
          endpoint_url: `${tools.url}/tools/order`,
          side_effect: true,
          idempotency: 'provider_key',
          receipt_url: `${tools.url}/receipts/{key}`,
        },
      ],
    });
    const chat = 91_004;
    const posts = () => tools.requests.filter((r) => r.method === 'POST').length;
    const postsBefore = posts();
    openai.enqueue({ toolCalls: [{ name: 'order', arguments: { item: 'tea' } }] }, 'ordered tea');
    try {
      await sendText(h, t, chat, 'o-tea');
      await waitFor(() => posts() > postsBefore, { label: 'the order is being dispatched' });
      await sendText(h, t, chat, 'o-milk');
      await allFinished(t.tenantId, 2, 30_000);
    } finally {
      tools.setFaultPlan(undefined);
    }
    const done = await rows(t.tenantId);
    expect(done.map((m) => [m.text, m.status, m.merged_into])).toEqual([
      ['o-tea', 'replied', null],
      ['o-milk', 'replied', null],
    ]);
    expect(texts(chat)).toEqual(['ordered tea', 're: o-milk']);
    expect(posts() - postsBefore).toBe(1);
    const [inv] = await h.sql<{ status: string }[]>`
      select status from tool_invocation where tenant_id = ${t.tenantId}`;
    expect(inv?.status).toBe('accepted');
  }, 60_000);

  it('reject: each message sent during a turn gets the busy reply exactly once; the turn answers its own', async () => {
    const t = await tenantWith({ conversation: { policy: 'reject', busy_reply: 'Busy, one moment.' } });
    const chat = 91_005;
    const release = holdNextCall();
    try {
      await sendText(h, t, chat, 'r-one');
      await waitFor(() => callsFor('r-one').length === 1, { label: 'the turn calls the model' });
      await sendText(h, t, chat, 'r-two');
      await sendText(h, t, chat, 'r-three');
      await waitFor(() => texts(chat).length === 2, { label: 'two busy replies' });
    } finally {
      openai.setFaultPlan(undefined);
      release();
    }
    const done = await allFinished(t.tenantId, 3);
    expect(done.map((m) => [m.text, m.status, m.outcome, m.merged_into])).toEqual([
      ['r-one', 'replied', null, null],
      ['r-two', 'replied', 'busy_rejected', null],
      ['r-three', 'replied', 'busy_rejected', null],
    ]);
    expect(texts(chat)).toEqual(['Busy, one moment.', 'Busy, one moment.', 're: r-one']);
    expect(callsFor('r-two')).toHaveLength(0);
    // Once the turn is over, the next message is a turn again, and its model sees the real
    // exchange (r-one and its answer), not the busy replies that finished before it.
    await sendText(h, t, chat, 'r-four');
    await allFinished(t.tenantId, 4);
    expect(texts(chat).at(-1)).toBe('re: r-four');
    const next = JSON.stringify((callsFor('r-four')[0]!.body as unknown as ChatCompletionRequest).messages);
    expect(next).toContain('re: r-one');
    expect(next).not.toContain('Busy, one moment.');
    expect(next).not.toContain('r-two');
    const busyMemory = await h.sql`
      select 1 from memory_entry m join message_event e
        on e.tenant_id = m.tenant_id and e.event_id = m.source_event_id
      where m.tenant_id = ${t.tenantId} and e.outcome = 'busy_rejected'`;
    expect(busyMemory).toHaveLength(0);
  }, 60_000);

  it('enqueue (no policy): one turn per message, in order', async () => {
    const t = await tenantWith({});
    const chat = 91_006;
    for (const text of ['e-one', 'e-two']) await sendText(h, t, chat, text);
    const done = await allFinished(t.tenantId, 2);
    expect(done.map((m) => m.merged_into)).toEqual([null, null]);
    expect(texts(chat)).toEqual(['re: e-one', 're: e-two']);
    expect(await messagesOf(h.sql, t.tenantId)).toHaveLength(2);
  }, 30_000);
});
