import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAT_INTERVALS_MS } from '../../activities/delivery';
import { DRAFT_MIN_EDIT_INTERVAL_MS } from '../../activities/live-drafts';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type AdminTenant, api, ok, snapshotTenant, tenantPath } from '../helpers/admin';
import { createOpenAIProfile, publishRevision, sendText, waitForMessage } from '../helpers/execution-flow';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Live drafts (binding config.live_drafts, a model profile with stream: true, Telegram): one
// placeholder message edited while the model streams, throttled; the committed reply (the outbox)
// stays the truth: the draft ends as exactly its first text segment, or the segment is sent.

describe('live drafts', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let openai: FakeOpenAI;

  const tenant = async (opts: { stream?: boolean; liveDrafts?: boolean } = {}) => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      config: { live_drafts: opts.liveDrafts ?? true },
    });
    telegram.addBot(t.botToken);
    const admin = { ...t, adminKey: TEST_ADMIN_TOKEN, modelProfileId: '' } as unknown as AdminTenant;
    const profile = await createOpenAIProfile(h.app, admin, {
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
      ...(opts.stream === undefined ? {} : { stream: opts.stream }),
    });
    await publishRevision(h.app, { ...admin, modelProfileId: profile.model_profile_id }, {});
    return { ...t, modelProfileId: profile.model_profile_id as string };
  };

  /** The committed reply's segments (the outbox), in order. */
  const outbox = (t: SeededTelegram, eventId: string) =>
    h.sql<{ content: string; provider_message_id: string | null }[]>`
      select content, provider_message_id from reply_outbox
      where tenant_id = ${t.tenantId} and event_id = ${eventId} order by segment_index`;
  const draftRow = async (t: SeededTelegram, eventId: string) =>
    (
      await h.sql<{ state: string; provider_message_id: string | null }[]>`
        select state, provider_message_id from live_draft where tenant_id = ${t.tenantId} and event_id = ${eventId}`
    )[0];
  const sendMessagesTo = (chat: number) =>
    telegram.requests.filter(
      (r) => r.endpoint === 'sendMessage' && String(r.chatId) === String(chat) && r.status === 200,
    );
  /** Gaps between the placeholder and each accepted edit of a chat, in order. */
  const editGaps = (chat: number) => {
    const times = [telegram.sentTo(chat)[0]!.at, ...telegram.editsIn(chat).map((e) => e.at)];
    return times.slice(1).map((at, i) => at - times[i]!);
  };
  const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
  /** Every editMessageText request to a chat, refused ones included (the fake logs each request). */
  const editRequestsTo = (chat: number) =>
    telegram.requests.filter((r) => r.endpoint === 'editMessageText' && String(r.chatId) === String(chat));
  const requestsTo = (chat: number, endpoint: string) =>
    telegram.requests.filter((r) => r.endpoint === endpoint && String(r.chatId) === String(chat));
  /**
   * What the code guarantees between two calls to a private chat: max(1 s, the chat's pacing
   * interval), each call's slot taken in the database just before it is sent. The fake stamps a
   * request when it arrives, so two gaps can differ by the time from the slot to the arrival:
   * CLOCK_TOLERANCE_MS allows for that (a loaded CI machine), no more.
   */
  const DIRECT_GAP_MS = Math.max(DRAFT_MIN_EDIT_INTERVAL_MS, CHAT_INTERVALS_MS['telegram/direct']);
  const CLOCK_TOLERANCE_MS = 100;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    openai = await startFakeOpenAI();
    // Production's send timeout (the harness default is 2 s): a draft call may take up to 5 s.
    await h.startWorker({ sendTimeoutMs: 5000 });
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await openai?.close();
  });

  it('edits one placeholder while the model streams; the chat ends with exactly the committed reply', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_001;
    const text = `Here is the answer: ${words(40)}.`;
    openai.setResponder(text);
    // ~6 s of streaming: the typing indicator would renew (4.5 s) were it not stopped by the draft.
    openai.setStreamOptions({ chunkChars: 6, chunkDelayMs: 100 });
    try {
      await sendText(h, t, chat, 'stream please');
      const m = await waitForMessage(h.sql, t.tenantId, 'stream please', (x) => x.status === 'replied');
      const segments = await outbox(t, m.event_id);
      expect(segments.map((s) => s.content)).toEqual([text]);

      // One sendMessage (the placeholder), showing partial text; the same message is the reply.
      expect(sendMessagesTo(chat)).toHaveLength(1);
      const placeholder = (sendMessagesTo(chat)[0]!.body as { text: string }).text;
      expect(text.startsWith(placeholder) && placeholder.length < text.length).toBe(true);
      expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual([text]);
      expect(segments[0]!.provider_message_id).toBe(String(telegram.sentTo(chat)[0]!.messageId));
      expect(await draftRow(t, m.event_id)).toMatchObject({ state: 'delivered' });

      // Several edits while it streamed, each max(1 s, the chat's 1.1 s pacing) after the one before.
      const edits = telegram.editsIn(chat);
      expect(edits.length).toBeGreaterThanOrEqual(3);
      expect(edits.at(-1)!.text).toBe(text);
      for (const gap of editGaps(chat))
        expect(gap).toBeGreaterThanOrEqual(DIRECT_GAP_MS - CLOCK_TOLERANCE_MS);

      // Typing stopped once the draft was visible.
      const placedAt = telegram.sentTo(chat)[0]!.at;
      const actions = telegram.chatActions.filter((a) => String(a.chatId) === String(chat));
      expect(actions.length).toBeGreaterThan(0);
      expect(actions.every((a) => a.at <= placedAt)).toBe(true);

      // The streamed call asked for usage, and the usage event has the streamed token counts.
      const completion = openai.completions.find((c) =>
        c.request.messages.some((x) => x.content === 'stream please'),
      )!;
      expect(completion.request).toMatchObject({ stream: true, stream_options: { include_usage: true } });
      const usage = await h.sql<{ tokens_in: number; tokens_out: number }[]>`
        select tokens_in::int, tokens_out::int from usage_event where tenant_id = ${t.tenantId} and event_id = ${m.event_id}`;
      expect(usage).toEqual([
        {
          tokens_in: completion.response.usage.prompt_tokens,
          tokens_out: completion.response.usage.completion_tokens,
        },
      ]);
    } finally {
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 60_000);

  it('edits refused: the reply is sent once by sendMessage and the draft removed', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_002;
    // ~5 s of streaming: time for several edits, had the turn not stopped at the first refusal.
    const text = `Refused edits still answer: ${words(40)}.`;
    openai.setResponder(text);
    openai.setStreamOptions({ chunkChars: 6, chunkDelayMs: 120 });
    telegram.refuseEdits("Bad Request: message can't be edited");
    try {
      await sendText(h, t, chat, 'no edits');
      const m = await waitForMessage(h.sql, t.tenantId, 'no edits', (x) => x.status === 'replied');
      // Two edit requests in all, both refused: the turn's first (after which it edits no more)
      // and delivery's.
      const editRequests = editRequestsTo(chat);
      expect(editRequests.map((r) => r.status)).toEqual([400, 400]);
      expect((editRequests[1]!.body as { text: string }).text).toBe(text);
      const sends = sendMessagesTo(chat).map((r) => (r.body as { text: string }).text);
      // The placeholder, then the reply: exactly once.
      expect(sends.filter((s) => s === text)).toHaveLength(1);
      expect(sends).toHaveLength(2);
      expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual([text]);
      expect(await draftRow(t, m.event_id)).toMatchObject({ state: 'replaced' });
      // The reply went out in a slot of its own after the refused edit, and before the draft was
      // deleted: the chat never showed neither.
      const replySent = sendMessagesTo(chat)[1]!.at;
      expect(replySent - editRequests[1]!.at).toBeGreaterThanOrEqual(DIRECT_GAP_MS - CLOCK_TOLERANCE_MS);
      const deletes = requestsTo(chat, 'deleteMessage');
      expect(deletes).toHaveLength(1);
      expect(deletes[0]!.at).toBeGreaterThanOrEqual(replySent);
    } finally {
      telegram.refuseEdits(undefined);
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 60_000);

  it('edits answered 429: the penalty is respected by every later call, and the reply still ends in the draft', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_006;
    const text = `Rate limited edits: ${words(14)}.`;
    openai.setResponder(text);
    openai.setStreamOptions({ chunkChars: 6, chunkDelayMs: 120 });
    let limited = 0;
    telegram.setFaultPlan((r) => {
      if (r.endpoint !== 'editMessageText' || String(r.chatId) !== String(chat) || limited >= 2) return;
      limited++;
      return { kind: 'rate_limit', retryAfterSeconds: 1 };
    });
    try {
      await sendText(h, t, chat, 'limit my edits');
      const m = await waitForMessage(h.sql, t.tenantId, 'limit my edits', (x) => x.status === 'replied');
      expect(limited).toBe(2);
      expect(telegram.violations.filter((v) => String(v.chatId) === String(chat))).toEqual([]);
      expect(sendMessagesTo(chat)).toHaveLength(1);
      expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual([text]);
      expect(await draftRow(t, m.event_id)).toMatchObject({ state: 'delivered' });
    } finally {
      telegram.setFaultPlan(undefined);
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 60_000);

  it('a reply longer than 4096: the draft shows it cut, ends as segment 1, the rest is sent', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_003;
    const para = (c: string) => `${c.repeat(999)}.`;
    const text = [para('a'), para('b'), para('c'), para('d'), para('e')].join('\n\n');
    openai.setResponder(text);
    // A chunk every 1.2 s: each is shown, the last one (over 4096) cut.
    openai.setStreamOptions({ chunkChars: 1000, chunkDelayMs: 1200 });
    try {
      await sendText(h, t, chat, 'a long one');
      const m = await waitForMessage(h.sql, t.tenantId, 'a long one', (x) => x.status === 'replied', 60_000);
      const segments = (await outbox(t, m.event_id)).map((s) => s.content);
      expect(segments.length).toBe(2);
      // Cut at the paragraph boundary (channels/segment.ts): nothing lost but the separator.
      expect(segments.join('').replace(/\s/g, '')).toBe(text.replace(/\s/g, ''));
      expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual(segments);
      expect(sendMessagesTo(chat)).toHaveLength(2);
      const cut = telegram.editsIn(chat).filter((e) => e.text.endsWith('…'));
      expect(cut.length).toBeGreaterThanOrEqual(1);
      expect(cut.every((e) => e.text.length === 4096)).toBe(true);
      expect(telegram.editsIn(chat).at(-1)!.text).toBe(segments[0]);
    } finally {
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 90_000);

  it('stream off (the default): no placeholder, no edits, one message', async () => {
    const t = await tenant();
    const chat = 93_004;
    openai.setStreamOptions({ chunkChars: 2, chunkDelayMs: 100 });
    try {
      await sendText(h, t, chat, 'plain please');
      await waitForMessage(h.sql, t.tenantId, 'plain please', (x) => x.status === 'replied');
    } finally {
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
    expect(telegram.editsIn(chat)).toHaveLength(0);
    expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual(['echo: plain please']);
    const completion = openai.completions.find((c) =>
      c.request.messages.some((x) => x.content === 'plain please'),
    )!;
    expect(completion.request.stream).toBeUndefined();
  }, 30_000);

  it('a stream dropped mid-answer: the retried turn edits the same placeholder', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_005;
    const text = `After a drop: ${words(10)}.`;
    openai.setResponder(text);
    openai.setStreamOptions({ chunkChars: 5, chunkDelayMs: 250 });
    openai.dropNextStreamAfter(6);
    try {
      await sendText(h, t, chat, 'drop once');
      const m = await waitForMessage(h.sql, t.tenantId, 'drop once', (x) => x.status === 'replied');
      const calls = openai.requests.filter(
        (r) => r.endpoint === 'chat.completions' && JSON.stringify(r.body).includes('drop once'),
      );
      expect(calls.length).toBe(2);
      // One placeholder in all (sent by the first attempt), edited by the retry into the reply.
      expect(sendMessagesTo(chat)).toHaveLength(1);
      expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual([text]);
      const [first] = telegram.sentTo(chat);
      expect(telegram.editsIn(chat).every((e) => e.messageId === first!.messageId)).toBe(true);
      expect(await draftRow(t, m.event_id)).toMatchObject({
        state: 'delivered',
        provider_message_id: String(first!.messageId),
      });
      // The dropped call's tokens were billed too: an (estimated) usage event for each call.
      const usage = await h.sql<{ tokens_out: number }[]>`
        select tokens_out::int from usage_event where tenant_id = ${t.tenantId} and event_id = ${m.event_id}`;
      expect(usage).toHaveLength(2);
      expect(usage.every((u) => u.tokens_out > 0)).toBe(true);
    } finally {
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 60_000);

  it('a draft edit still on the wire when the stream ends: the turn waits for it, the chat ends with the reply', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_007;
    const text = `Late edits never win: ${words(12)}.`;
    openai.setResponder(text);
    // ~1.5 s of streaming; the turn's first edit (at ~1.1 s) reaches Telegram 3 s later, past
    // the end of the stream (longer than the 2 s stop() used to wait, within the 5 s timeout).
    openai.setStreamOptions({ chunkChars: 6, chunkDelayMs: 100 });
    let delayed = 0;
    telegram.setFaultPlan((r) => {
      if (r.endpoint !== 'editMessageText' || String(r.chatId) !== String(chat) || delayed > 0) return;
      delayed++;
      return { kind: 'late', ms: 3000 };
    });
    try {
      await sendText(h, t, chat, 'late edit');
      const m = await waitForMessage(h.sql, t.tenantId, 'late edit', (x) => x.status === 'replied');
      expect(delayed).toBe(1);
      const segments = (await outbox(t, m.event_id)).map((s) => s.content);
      expect(segments).toEqual([text]);
      // Give any straggler time to land: nothing may change the chat after the reply.
      await new Promise((r) => setTimeout(r, 3500));
      expect(telegram.visibleIn(chat).map((x) => x.text)).toEqual(segments);
      expect(telegram.editsIn(chat).at(-1)!.text).toBe(text);
      expect(await draftRow(t, m.event_id)).toMatchObject({ state: 'delivered' });
    } finally {
      telegram.setFaultPlan(undefined);
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 60_000);

  it('a reply with no segments after a streamed preamble: the draft is deleted, the chat left as before', async () => {
    const t = await tenant({ stream: true });
    const chat = 93_008;
    // The first call streams a preamble and is cut; its retry answers nothing (empty_reply).
    let calls = 0;
    openai.setResponder(() => (calls++ === 0 ? `Let me look that up: ${words(10)}` : ''));
    openai.setStreamOptions({ chunkChars: 5, chunkDelayMs: 150 });
    openai.dropNextStreamAfter(8);
    try {
      await sendText(h, t, chat, 'nothing to say');
      const m = await waitForMessage(h.sql, t.tenantId, 'nothing to say', (x) => x.status === 'replied');
      expect(m).toMatchObject({ outcome: 'empty_reply' });
      expect(await outbox(t, m.event_id)).toEqual([]);
      expect(sendMessagesTo(chat)).toHaveLength(1);
      // The draft is deleted right after the finish commits (finishDraft runs after message_finish).
      await waitFor(() => telegram.visibleIn(chat).length === 0, {
        label: 'draft deleted',
        timeoutMs: 10_000,
      });
      expect(telegram.deletions.filter((d) => String(d.chatId) === String(chat))).toHaveLength(1);
      expect(await draftRow(t, m.event_id)).toMatchObject({ state: 'deleted' });
      // The cut call's tokens were billed: a usage event (estimated: no usage chunk came) for it,
      // and one for the retry.
      const usage = await h.sql<{ tokens_out: number }[]>`
        select tokens_out::int from usage_event where tenant_id = ${t.tenantId} and event_id = ${m.event_id}
        order by occurred_at`;
      expect(usage).toHaveLength(2);
      expect(usage[0]!.tokens_out).toBeGreaterThan(0);
    } finally {
      openai.setResponder(undefined);
      openai.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0 });
    }
  }, 60_000);

  it('refuses live_drafts where the channel has no drafts, and a non-boolean stream; nothing changes', async () => {
    const t = await tenant({ stream: true });
    const path = (rest: string) => tenantPath(t.tenantId, rest);
    const before = await snapshotTenant(h.sql, t.tenantId);
    const fieldsOf = (body: {
      error: { code: string; details: { fields: { path: string; message: string }[] } };
    }) => {
      expect(body.error.code).toBe('validation_failed');
      return body.error.details.fields;
    };

    const wecom = await api(h.app, 'POST', path('/bindings'), {
      body: {
        channel: 'wecom',
        provider_account_id: 'ww0123abcd/1000002',
        app_id: t.appId,
        secret_ref: 'sec_x',
        config: { corp_id: 'ww0123abcd', agent_id: 1000002, live_drafts: true },
      },
    });
    expect(wecom.status).toBe(400);
    expect(fieldsOf(wecom.body)).toEqual([
      { path: 'config.live_drafts', message: expect.stringMatching(/drafts.*wecom/) },
    ]);
    // `live_drafts: false` (the default, said explicitly) is fine on WeCom: only the bad agent_id
    // is refused here.
    const wecomOff = await api(h.app, 'POST', path('/bindings'), {
      body: {
        channel: 'wecom',
        provider_account_id: 'ww0123abcd/1000002',
        app_id: t.appId,
        secret_ref: 'sec_x',
        config: { corp_id: 'ww0123abcd', agent_id: -1, live_drafts: false },
      },
    });
    expect(wecomOff.status).toBe(400);
    expect(fieldsOf(wecomOff.body).map((f) => f.path)).toEqual(['config.agent_id']);

    const consoleBinding = await api(h.app, 'POST', path('/bindings'), {
      body: { channel: 'console', app_id: t.appId, config: { live_drafts: true } },
    });
    expect(consoleBinding.status).toBe(400);
    expect(fieldsOf(consoleBinding.body)).toEqual([
      { path: '', message: expect.stringMatching(/live_drafts/) },
    ]);

    const telegramBad = await api(h.app, 'POST', path('/bindings'), {
      body: {
        channel: 'telegram',
        provider_account_id: '123456',
        app_id: t.appId,
        secret_ref: 'sec_x',
        config: { live_drafts: 'yes' },
      },
    });
    expect(telegramBad.status).toBe(400);
    expect(fieldsOf(telegramBad.body).map((f) => f.path)).toEqual(['config.live_drafts']);

    const badProfile = await api(h.app, 'POST', path('/model-profiles'), {
      body: { profile_key: 'streamy', provider: 'scripted', model: 'rules', stream: 'yes' },
    });
    expect(badProfile.status).toBe(400);
    expect(fieldsOf(badProfile.body).map((f) => f.path)).toEqual(['stream']);
    const current = await ok(api(h.app, 'GET', path(`/model-profiles/${t.modelProfileId}`)));
    expect(current.stream).toBe(true);
    const badPut = await api(h.app, 'PUT', path(`/model-profiles/${t.modelProfileId}`), {
      body: {
        expected_version: current.version,
        provider: current.provider,
        model: current.model,
        base_url: current.base_url,
        api_key_secret_ref: current.api_key_secret_ref,
        stream: 1,
      },
    });
    expect(badPut.status).toBe(400);
    expect(fieldsOf(badPut.body).map((f) => f.path)).toEqual(['stream']);

    expect(await snapshotTenant(h.sql, t.tenantId)).toEqual(before);
  });

  it('stream is part of a profile’s content: it changes the digest and defaults to false', async () => {
    const t = await tenant({ stream: true });
    const body = (stream?: boolean) => ({
      profile_key: `p-${Math.random().toString(36).slice(2, 8)}`,
      provider: 'scripted',
      model: 'rules',
      ...(stream === undefined ? {} : { stream }),
    });
    const plain = await ok(
      api(h.app, 'POST', tenantPath(t.tenantId, '/model-profiles'), { body: body() }),
      201,
    );
    const off = await ok(
      api(h.app, 'POST', tenantPath(t.tenantId, '/model-profiles'), { body: body(false) }),
      201,
    );
    const on = await ok(
      api(h.app, 'POST', tenantPath(t.tenantId, '/model-profiles'), { body: body(true) }),
      201,
    );
    expect([plain.stream, off.stream, on.stream]).toEqual([false, false, true]);
    expect(plain.content_digest).toBe(off.content_digest);
    expect(on.content_digest).not.toBe(off.content_digest);
    const [version] = await h.sql<{ stream: boolean }[]>`
      select stream from model_profile_version where tenant_id = ${t.tenantId} and model_profile_id = ${on.model_profile_id}`;
    expect(version?.stream).toBe(true);
  });
});
