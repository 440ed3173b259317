import { afterEach, describe, expect, it } from 'vitest';
import { type Fault, seededRandom } from '../fakes/http';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';

const open: Array<{ close(): Promise<void> }> = [];
async function track<T extends { close(): Promise<void> }>(p: Promise<T>): Promise<T> {
  const f = await p;
  open.push(f);
  return f;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((f) => f.close()));
});

const TOKEN = '123456:ABC-secret';
const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
});

// ---------------------------------------------------------------------------------------------
// Generic fault behaviour, run against every fake
// ---------------------------------------------------------------------------------------------
interface Harness {
  name: string;
  start(): Promise<{ faults: Fault[]; readonly faultsInjected: number; close(): Promise<void> }>;
  /** performs one effectful request; resolves with the Response */
  call(signal?: AbortSignal): Promise<Response>;
  /** number of effects applied so far */
  effects(): number;
}

let tg: FakeTelegram;
let wc: FakeWecom;
let tp: FakeToolProvider;
let oa: FakeOpenAI;
let wcToken = '';

const harnesses: Harness[] = [
  {
    name: 'telegram',
    start: async () => {
      tg = await track(startFakeTelegram({ bots: [TOKEN] }));
      return tg;
    },
    call: (signal) =>
      fetch(`${tg.url}/bot${TOKEN}/sendMessage`, { ...json({ chat_id: 42, text: 'hi' }), signal }),
    effects: () => tg.sent.length,
  },
  {
    name: 'wecom',
    start: async () => {
      wc = await track(
        startFakeWecom({ apps: [{ corpId: 'corp', corpSecret: 's3cret', agentId: 1000002 }] }),
      );
      const r = await fetch(`${wc.url}/cgi-bin/gettoken?corpid=corp&corpsecret=s3cret`);
      wcToken = ((await r.json()) as { access_token: string }).access_token;
      return wc;
    },
    call: (signal) =>
      fetch(`${wc.url}/cgi-bin/message/send?access_token=${wcToken}`, {
        ...json({ touser: 'alice', msgtype: 'text', agentid: 1000002, text: { content: 'hi' } }),
        signal,
      }),
    effects: () => wc.delivered.length,
  },
  {
    name: 'tool-provider',
    start: async () => {
      tp = await track(startFakeToolProvider());
      return tp;
    },
    call: (signal) =>
      fetch(`${tp.url}/tools/create_ticket`, {
        ...json({ title: 'x' }, { 'Idempotency-Key': 'k1' }),
        signal,
      }),
    effects: () => tp.effects.length,
  },
  {
    name: 'openai',
    start: async () => {
      oa = await track(startFakeOpenAI());
      return oa;
    },
    call: (signal) =>
      fetch(`${oa.baseURL}/chat/completions`, {
        ...json(
          { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
          { authorization: 'Bearer sk-fake' },
        ),
        signal,
      }),
    effects: () => oa.completions.length,
  },
];

describe.each(harnesses)('$name fake: generic faults', (h) => {
  it('happy path applies the effect', async () => {
    await h.start();
    const res = await h.call();
    expect(res.status).toBe(200);
    expect(h.effects()).toBe(1);
  });

  it('timeout: holds the request without applying', async () => {
    const fake = await h.start();
    fake.faults.push({ kind: 'timeout', ms: 10_000 });
    await expect(h.call(AbortSignal.timeout(150))).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(h.effects()).toBe(0);
    expect(fake.faultsInjected).toBe(1);
    // the next request is healthy
    expect((await h.call()).status).toBe(200);
    expect(h.effects()).toBe(1);
  });

  it('timeout: releases the socket after ms without answering', async () => {
    const fake = await h.start();
    fake.faults.push({ kind: 'timeout', ms: 50 });
    await expect(h.call()).rejects.toThrow();
    expect(h.effects()).toBe(0);
  });

  it('apply_then_drop: the client sees a network error but the effect is recorded', async () => {
    const fake = await h.start();
    fake.faults.push({ kind: 'apply_then_drop' });
    await expect(h.call()).rejects.toThrow(TypeError);
    expect(h.effects()).toBe(1);
    expect(fake.faultsInjected).toBe(1);
  });

  it('delay: applies and answers late', async () => {
    const fake = await h.start();
    fake.faults.push({ kind: 'delay', ms: 200 });
    const t0 = Date.now();
    const p = h.call();
    await new Promise((r) => setTimeout(r, 50));
    expect(h.effects()).toBe(1);
    const res = await p;
    expect(res.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it('status: answers the injected status without applying', async () => {
    const fake = await h.start();
    fake.faults.push({ kind: 'status', status: 503 });
    const res = await h.call();
    expect(res.status).toBe(503);
    await res.json();
    expect(h.effects()).toBe(0);
  });

  it('close() with a held request resolves promptly', async () => {
    const fake = await h.start();
    fake.faults.push({ kind: 'timeout', ms: 60_000 });
    const p = h.call().catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    await fake.close();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(await p).toBeInstanceOf(Error);
  });
});

describe('seeded random faults', () => {
  it('seededRandom is deterministic', () => {
    const a = seededRandom(7);
    const b = seededRandom(7);
    const xs = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it('failRandomly is reproducible for a seed and counts faults', async () => {
    const pattern = async () => {
      const f = await track(startFakeTelegram({ bots: [TOKEN] }));
      f.failRandomly({ rate: 0.3, fault: { kind: 'status', status: 500 }, seed: 42 });
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) {
        const r = await fetch(`${f.url}/bot${TOKEN}/sendMessage`, json({ chat_id: 1, text: `m${i}` }));
        statuses.push(r.status);
      }
      return { statuses, injected: f.faultsInjected, sent: f.sent.length };
    };
    const a = await pattern();
    const b = await pattern();
    expect(a.statuses).toEqual(b.statuses);
    expect(a.injected).toBeGreaterThan(3);
    expect(a.injected).toBeLessThan(25);
    expect(a.injected + a.sent).toBe(40);
  });
});

// ---------------------------------------------------------------------------------------------
// Telegram
// ---------------------------------------------------------------------------------------------
describe('fake Telegram', () => {
  const send = (f: FakeTelegram, body: Record<string, unknown>, token = TOKEN) =>
    fetch(`${f.url}/bot${token}/sendMessage`, json(body));

  it('sendMessage returns a Message with per-chat incrementing ids and thread id', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    const r1 = await send(f, { chat_id: 42, text: 'one' });
    const r2 = await send(f, { chat_id: 42, text: 'two', message_thread_id: 7, parse_mode: 'HTML' });
    const r3 = await send(f, { chat_id: -100123, text: 'other chat' });
    const b1 = (await r1.json()) as {
      ok: boolean;
      result: { message_id: number; chat: { id: number; type: string } };
    };
    const b2 = (await r2.json()) as {
      result: { message_id: number; message_thread_id: number; text: string };
    };
    const b3 = (await r3.json()) as { result: { message_id: number; chat: { type: string } } };
    expect(b1.ok).toBe(true);
    expect(b1.result.message_id).toBe(1);
    expect(b1.result.chat).toMatchObject({ id: 42, type: 'private' });
    expect(b2.result).toMatchObject({ message_id: 2, message_thread_id: 7, text: 'two' });
    expect(b3.result.message_id).toBe(1);
    expect(f.sentTo(42).map((s) => s.text)).toEqual(['one', 'two']);
    expect(f.sent[1]).toMatchObject({
      token: TOKEN,
      chatId: 42,
      threadId: 7,
      messageId: 2,
      parseMode: 'HTML',
    });
    expect(f.intervals(42)).toHaveLength(1);
  });

  it('editMessageText: edits, "message is not modified", refusals, 429; deleteMessage', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    const call = (method: string, body: Record<string, unknown>) =>
      fetch(`${f.url}/bot${TOKEN}/${method}`, json(body)).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as {
          ok: boolean;
          description?: string;
          parameters?: { retry_after?: number };
        },
      }));
    await send(f, { chat_id: 42, text: 'draft' });
    expect((await call('editMessageText', { chat_id: 42, message_id: 1, text: 'draft, more' })).body.ok).toBe(
      true,
    );
    const same = await call('editMessageText', { chat_id: 42, message_id: 1, text: 'draft, more' });
    expect(same.status).toBe(400);
    expect(same.body.description).toContain('message is not modified');
    expect(f.editsIn(42).map((e) => e.text)).toEqual(['draft, more']);
    expect(f.visibleIn(42).map((m) => m.text)).toEqual(['draft, more']);

    f.refuseEdits("Bad Request: message can't be edited");
    expect((await call('editMessageText', { chat_id: 42, message_id: 1, text: 'x' })).status).toBe(400);
    f.refuseEdits(undefined);
    f.setFaultPlan((r) =>
      r.endpoint === 'editMessageText' ? { kind: 'rate_limit', retryAfterSeconds: 3 } : undefined,
    );
    const limited = await call('editMessageText', { chat_id: 42, message_id: 1, text: 'y' });
    expect(limited).toMatchObject({ status: 429, body: { parameters: { retry_after: 3 } } });
    f.setFaultPlan(undefined);

    f.clearFaults();
    const fresh = await track(startFakeTelegram({ bots: [TOKEN] }));
    await fetch(`${fresh.url}/bot${TOKEN}/sendMessage`, json({ chat_id: 7, text: 'gone soon' }));
    const del = (body: Record<string, unknown>) =>
      fetch(`${fresh.url}/bot${TOKEN}/deleteMessage`, json(body)).then((r) => r.status);
    expect(await del({ chat_id: 7, message_id: 1 })).toBe(200);
    expect(await del({ chat_id: 7, message_id: 1 })).toBe(400);
    expect(fresh.visibleIn(7)).toHaveLength(0);
    expect(fresh.deletions).toHaveLength(1);
    const edit = await fetch(
      `${fresh.url}/bot${TOKEN}/editMessageText`,
      json({ chat_id: 7, message_id: 1, text: 'z' }),
    );
    expect(((await edit.json()) as { description: string }).description).toContain(
      'message to edit not found',
    );
  });

  it('accepts application/x-www-form-urlencoded', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    const res = await fetch(`${f.url}/bot${TOKEN}/sendMessage`, {
      method: 'POST',
      body: new URLSearchParams({ chat_id: '42', text: 'form', message_thread_id: '3' }),
    });
    expect(res.status).toBe(200);
    expect(f.sent[0]).toMatchObject({ chatId: 42, text: 'form', threadId: 3 });
  });

  it('getMe returns the bot identity; unknown token is 401', async () => {
    const f = await track(startFakeTelegram());
    f.addBot(TOKEN);
    const me = (await (await fetch(`${f.url}/bot${TOKEN}/getMe`)).json()) as { result: unknown };
    expect(me.result).toMatchObject({ id: 123456, is_bot: true, first_name: 'Fake', username: 'fake_bot' });
    const bad = await send(f, { chat_id: 1, text: 'x' }, '999:nope');
    expect(bad.status).toBe(401);
    expect(await bad.json()).toEqual({ ok: false, error_code: 401, description: 'Unauthorized' });
  });

  it('getMe answers an injected identity, and 401 once the token is removed', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    const getMe = async () => {
      const res = await fetch(`${f.url}/bot${TOKEN}/getMe`, { method: 'POST' });
      return { status: res.status, body: (await res.json()) as { result?: { id: number } } };
    };
    f.setBotIdentity(TOKEN, { id: 777 });
    expect((await getMe()).body.result).toMatchObject({ id: 777, is_bot: true });
    f.setBotIdentity(TOKEN, undefined);
    expect((await getMe()).body.result).toMatchObject({ id: 123456 });
    f.removeBot(TOKEN);
    expect(await getMe()).toEqual({
      status: 401,
      body: { ok: false, error_code: 401, description: 'Unauthorized' },
    });
  });

  it('rejects too long (UTF-16 units) and empty text', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    expect((await send(f, { chat_id: 1, text: 'a'.repeat(4096) })).status).toBe(200);
    expect((await send(f, { chat_id: 1, text: '😀'.repeat(2048) })).status).toBe(200);
    const long = await send(f, { chat_id: 1, text: '😀'.repeat(2049) });
    expect(long.status).toBe(400);
    expect(await long.json()).toEqual({
      ok: false,
      error_code: 400,
      description: 'Bad Request: message is too long',
    });
    const empty = await send(f, { chat_id: 1, text: '' });
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as { description: string }).description).toBe(
      'Bad Request: message text is empty',
    );
    expect(f.sent).toHaveLength(2);
  });

  it('blocked and missing chats', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    f.blockChat(5);
    f.missingChat(6);
    const blocked = await send(f, { chat_id: 5, text: 'x' });
    expect(blocked.status).toBe(403);
    expect(((await blocked.json()) as { description: string }).description).toBe(
      'Forbidden: bot was blocked by the user',
    );
    const missing = await send(f, { chat_id: 6, text: 'x' });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { description: string }).description).toBe(
      'Bad Request: chat not found',
    );
    expect(f.sent).toHaveLength(0);
  });

  it('status fault has a Bot API error body', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    f.faults.push({ kind: 'status', status: 502 });
    const res = await send(f, { chat_id: 1, text: 'x' });
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ ok: false, error_code: 502, description: 'Bad Gateway' });
    expect(f.requests[0]?.fault).toBe('status');
  });

  it('rate_limit: 429 with retry_after, penalty recorded, early retries are violations', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    f.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const res = await send(f, { chat_id: 9, text: 'x' });
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({
      ok: false,
      error_code: 429,
      description: 'Too Many Requests: retry after 1',
      parameters: { retry_after: 1 },
    });
    expect(f.penaltyUntil(9)).toBeGreaterThan(Date.now());
    // other chats are unaffected
    expect((await send(f, { chat_id: 10, text: 'y' })).status).toBe(200);
    // retrying too early is a violation (and still 429)
    const early = await send(f, { chat_id: 9, text: 'x' });
    expect(early.status).toBe(429);
    expect(f.violations).toHaveLength(1);
    expect(f.violations[0]).toMatchObject({ chatId: 9 });
    // retrying after the penalty is fine
    await new Promise((r) => setTimeout(r, 1000));
    expect((await send(f, { chat_id: 9, text: 'x' })).status).toBe(200);
    expect(f.violations).toHaveLength(1);
    expect(f.sentTo(9)).toHaveLength(1);
  });

  it('setFaultPlan sees the parsed request', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    f.setFaultPlan((req) => (req.chatId === 13 ? { kind: 'status', status: 500 } : undefined));
    expect((await send(f, { chat_id: 13, text: 'x' })).status).toBe(500);
    expect((await send(f, { chat_id: 14, text: 'x' })).status).toBe(200);
    expect(f.faultsInjected).toBe(1);
    expect(f.faultsByKind.status).toBe(1);
    expect(f.requests.map((r) => r.fault)).toEqual(['status', undefined]);
  });

  it('waitForSent resolves and rejects with a clear message', async () => {
    const f = await track(startFakeTelegram({ bots: [TOKEN] }));
    const waiting = f.waitForSent(1, 2000);
    await send(f, { chat_id: 1, text: 'x' });
    await waiting;
    await expect(f.waitForSent(3, 50)).rejects.toThrow(/timed out after 50ms waiting for 3 .*\(have 1\)/);
  });
});

// ---------------------------------------------------------------------------------------------
// WeCom
// ---------------------------------------------------------------------------------------------
describe('fake WeCom', () => {
  const APP = { corpId: 'ww1', corpSecret: 'sec', agentId: 1000002 };
  const getToken = async (f: FakeWecom, secret = APP.corpSecret) =>
    (await (await fetch(`${f.url}/cgi-bin/gettoken?corpid=${APP.corpId}&corpsecret=${secret}`)).json()) as {
      errcode: number;
      errmsg: string;
      access_token: string;
      expires_in: number;
    };
  const sendMsg = async (f: FakeWecom, token: string, body: Record<string, unknown>) => {
    const res = await fetch(`${f.url}/cgi-bin/message/send?access_token=${token}`, json(body));
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const text = (content: string, extra: Record<string, unknown> = {}) => ({
    touser: 'alice',
    msgtype: 'text',
    agentid: APP.agentId,
    text: { content },
    ...extra,
  });

  it('gettoken issues tokens for registered apps and counts calls', async () => {
    const f = await track(startFakeWecom());
    f.addApp(APP);
    const t1 = await getToken(f);
    expect(t1).toMatchObject({ errcode: 0, errmsg: 'ok', expires_in: 7200 });
    expect(t1.access_token).toBeTruthy();
    const t2 = await getToken(f);
    expect(t2.access_token).toBe(t1.access_token);
    expect(await getToken(f, 'wrong')).toEqual({ errcode: 40001, errmsg: 'invalid credential' });
    const unknownCorp = await fetch(`${f.url}/cgi-bin/gettoken?corpid=ww-unknown&corpsecret=sec`);
    expect(await unknownCorp.json()).toEqual({ errcode: 40013, errmsg: 'invalid corpid' });
    f.failGettoken(APP.corpId, -1);
    expect(await getToken(f)).toEqual({ errcode: -1, errmsg: 'system busy' });
    f.failGettoken(APP.corpId, undefined);
    expect(f.tokenCalls(APP.corpId)).toBe(4);
    expect(f.tokenCalls('other')).toBe(0);
  });

  it('message/send delivers and returns a unique msgid', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    const { access_token } = await getToken(f);
    const a = await sendMsg(f, access_token, text('hello'));
    const b = await sendMsg(f, access_token, text('world'));
    expect(a).toMatchObject({ status: 200, body: { errcode: 0, errmsg: 'ok' } });
    expect(a.body.msgid).toBeTruthy();
    expect(a.body.msgid).not.toBe(b.body.msgid);
    expect(f.delivered.map((d) => d.content)).toEqual(['hello', 'world']);
    expect(f.delivered[0]).toMatchObject({ agentId: APP.agentId, touser: 'alice', msgtype: 'text' });
    expect(f.deliveredTo('alice')).toHaveLength(2);
    await f.waitForDelivered(2, 100);
  });

  it('appchat/send delivers to a group chat', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    const { access_token } = await getToken(f);
    const res = await fetch(
      `${f.url}/cgi-bin/appchat/send?access_token=${access_token}`,
      json({ chatid: 'grp1', msgtype: 'text', text: { content: 'hi all' } }),
    );
    expect(await res.json()).toMatchObject({ errcode: 0, errmsg: 'ok' });
    expect(f.delivered[0]).toMatchObject({ endpoint: 'appchat/send', chatid: 'grp1', content: 'hi all' });
  });

  it('content over 2048 UTF-8 bytes → 45002', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    const { access_token } = await getToken(f);
    expect((await sendMsg(f, access_token, text('a'.repeat(2048)))).body.errcode).toBe(0);
    const big = await sendMsg(f, access_token, text('中'.repeat(683))); // 2049 bytes
    expect(big).toEqual({ status: 200, body: { errcode: 45002, errmsg: 'content size out of limit' } });
    expect(f.delivered).toHaveLength(1);
  });

  it('invalid users → 81013 (HTTP 200); mixed recipients report invaliduser', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    f.invalidUser('ghost');
    const { access_token } = await getToken(f);
    const r = await sendMsg(f, access_token, text('x', { touser: 'ghost' }));
    expect(r).toEqual({ status: 200, body: { errcode: 81013, errmsg: 'user & party & tag all invalid' } });
    const mixed = await sendMsg(f, access_token, text('x', { touser: 'ghost|bob' }));
    expect(mixed.body).toMatchObject({ errcode: 0, invaliduser: 'ghost' });
    expect(f.delivered).toHaveLength(1);
    expect(f.delivered[0]?.touser).toBe('bob');
  });

  it('duplicate check suppresses identical messages within the interval', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    const { access_token } = await getToken(f);
    const msg = text('same', { enable_duplicate_check: 1, duplicate_check_interval: 600 });
    const a = await sendMsg(f, access_token, msg);
    const b = await sendMsg(f, access_token, msg);
    expect(b.body).toMatchObject({ errcode: 0, msgid: a.body.msgid });
    expect(f.delivered).toHaveLength(1);
    expect(f.duplicatesSuppressed).toBe(1);
    expect(f.duplicatesDelivered).toBe(0);
    // different recipient or content is not a duplicate
    await sendMsg(f, access_token, text('same', { touser: 'bob', enable_duplicate_check: 1 }));
    await sendMsg(f, access_token, text('other', { enable_duplicate_check: 1 }));
    expect(f.delivered).toHaveLength(3);
    // without the check, an identical message is delivered again and counted
    await sendMsg(f, access_token, text('same'));
    expect(f.delivered).toHaveLength(4);
    expect(f.duplicatesDelivered).toBe(1);
  });

  it('duplicate check window expires after duplicate_check_interval', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    const { access_token } = await getToken(f);
    const msg = text('same', { enable_duplicate_check: 1, duplicate_check_interval: 1 });
    await sendMsg(f, access_token, msg);
    await new Promise((r) => setTimeout(r, 1050));
    await sendMsg(f, access_token, msg);
    expect(f.delivered).toHaveLength(2);
    expect(f.duplicatesSuppressed).toBe(0);
  });

  it('expired token → 42001, unknown token → 40014, refetch works', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    const { access_token } = await getToken(f);
    f.expireTokens();
    expect((await sendMsg(f, access_token, text('x'))).body).toEqual({
      errcode: 42001,
      errmsg: 'access_token expired',
    });
    expect((await sendMsg(f, 'bogus', text('x'))).body).toMatchObject({ errcode: 40014 });
    const fresh = await getToken(f);
    expect(fresh.access_token).not.toBe(access_token);
    expect((await sendMsg(f, fresh.access_token, text('x'))).body.errcode).toBe(0);
    expect(f.tokenCalls(APP.corpId)).toBe(2);
  });

  it('rate_limit → HTTP 200 errcode 45009; queued faults skip gettoken', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    f.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const { access_token } = await getToken(f);
    expect(access_token).toBeTruthy();
    const r = await sendMsg(f, access_token, text('x'));
    expect(r).toEqual({ status: 200, body: { errcode: 45009, errmsg: 'api freq out of limit' } });
    expect(f.delivered).toHaveLength(0);
    expect(f.requests.at(-1)).toMatchObject({
      endpoint: 'message/send',
      fault: 'rate_limit',
      errcode: 45009,
    });
  });

  it('setFaultPlan can fault gettoken', async () => {
    const f = await track(startFakeWecom({ apps: [APP] }));
    f.setFaultPlan((req) => (req.endpoint === 'gettoken' ? { kind: 'status', status: 500 } : undefined));
    const res = await fetch(`${f.url}/cgi-bin/gettoken?corpid=${APP.corpId}&corpsecret=${APP.corpSecret}`);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ errcode: -1, errmsg: 'system busy' });
    expect(f.tokenCalls(APP.corpId)).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------
// Tool provider
// ---------------------------------------------------------------------------------------------
describe('fake tool provider', () => {
  const call = (f: FakeToolProvider, tool: string, args: unknown, key?: string) =>
    fetch(`${f.url}/tools/${tool}`, json(args, key ? { 'Idempotency-Key': key } : {}));

  it('applies at most once per idempotency key', async () => {
    const f = await track(startFakeToolProvider());
    const a = await call(f, 'refund', { order: 1, amount: 5 }, 'key-a');
    const ra = (await a.json()) as { receipt_id: string; key: string; result: unknown };
    expect(a.status).toBe(200);
    expect(ra).toMatchObject({ key: 'key-a', result: { order: 1, amount: 5 } });
    const again = (await (await call(f, 'refund', { order: 1, amount: 5 }, 'key-a')).json()) as typeof ra;
    expect(again).toEqual(ra);
    expect(f.effectCount('key-a')).toBe(1);
    expect(f.requests.at(-1)?.replayed).toBe(true);
    await call(f, 'refund', { order: 2, amount: 5 }, 'key-b');
    expect(f.effects.map((e) => e.key)).toEqual(['key-a', 'key-b']);
  });

  it('receipts: 404 before, 200 after', async () => {
    const f = await track(startFakeToolProvider());
    expect((await fetch(`${f.url}/receipts/k9`)).status).toBe(404);
    await call(f, 'refund', { x: 1 }, 'k9');
    const r = await fetch(`${f.url}/receipts/k9`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ key: 'k9', tool: 'refund', result: { x: 1 } });
  });

  it('missing key → 400, reused key with other args → 422, rejected tool → 4xx', async () => {
    const f = await track(startFakeToolProvider());
    const missing = await call(f, 'refund', { x: 1 });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toHaveProperty('error');
    await call(f, 'refund', { x: 1 }, 'k');
    expect((await call(f, 'refund', { x: 2 }, 'k')).status).toBe(422);
    f.rejectTool('delete_everything', { status: 403, error: 'forbidden' });
    const rej = await call(f, 'delete_everything', {}, 'k2');
    expect(rej.status).toBe(403);
    expect(await rej.json()).toEqual({ error: 'forbidden' });
    expect((await fetch(`${f.url}/receipts/k2`)).status).toBe(404);
    f.acceptTool('delete_everything');
    expect((await call(f, 'delete_everything', {}, 'k2')).status).toBe(200);
    expect(f.effects).toHaveLength(2);
  });

  it('rate_limit → 429 with Retry-After', async () => {
    const f = await track(startFakeToolProvider());
    f.faults.push({ kind: 'rate_limit', retryAfterSeconds: 3 });
    const r = await call(f, 'refund', { x: 1 }, 'k');
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('3');
    expect(await r.json()).toHaveProperty('error');
    expect(f.effects).toHaveLength(0);
  });

  it('apply_then_drop: receipt exists and a retry with the same key does not re-apply', async () => {
    const f = await track(startFakeToolProvider());
    f.faults.push({ kind: 'apply_then_drop' });
    await expect(call(f, 'refund', { x: 1 }, 'kk')).rejects.toThrow();
    expect((await fetch(`${f.url}/receipts/kk`)).status).toBe(200);
    expect((await call(f, 'refund', { x: 1 }, 'kk')).status).toBe(200);
    expect(f.effectCount('kk')).toBe(1);
  });

  it('timeout: nothing applied, receipt 404', async () => {
    const f = await track(startFakeToolProvider());
    f.faults.push({ kind: 'timeout', ms: 5000 });
    await expect(
      fetch(`${f.url}/tools/refund`, {
        ...json({ x: 1 }, { 'Idempotency-Key': 'kt' }),
        signal: AbortSignal.timeout(100),
      }),
    ).rejects.toMatchObject({ name: 'TimeoutError' });
    expect((await fetch(`${f.url}/receipts/kt`)).status).toBe(404);
  });
});

// ---------------------------------------------------------------------------------------------
// OpenAI-compatible
// ---------------------------------------------------------------------------------------------
describe('fake OpenAI', () => {
  const complete = (f: FakeOpenAI, body: unknown, key = f.apiKey, path = '/v1/chat/completions') =>
    fetch(`${f.url}${path}`, json(body, { authorization: `Bearer ${key}` }));
  const req = (text: string) => ({ model: 'gpt-fake', messages: [{ role: 'user', content: text }] });

  it('returns a valid chat.completion echoing the last user message', async () => {
    const f = await track(startFakeOpenAI());
    const res = await complete(f, {
      model: 'gpt-fake',
      messages: [
        { role: 'system', content: 'be nice' },
        { role: 'user', content: 'first' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: [{ type: 'text', text: 'second' }] },
      ],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown> & {
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
    };
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-fake',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: second' }, finish_reason: 'stop' }],
    });
    expect(typeof body.id).toBe('string');
    expect(typeof body.created).toBe('number');
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    expect(f.requests[0]).toMatchObject({ endpoint: 'chat.completions', model: 'gpt-fake' });
  });

  it('accepts any base path ending in /chat/completions', async () => {
    const f = await track(startFakeOpenAI());
    expect((await complete(f, req('x'), f.apiKey, '/openai/deployments/d1/chat/completions')).status).toBe(
      200,
    );
  });

  it('scripted queue with tool calls, then the default responder', async () => {
    const f = await track(startFakeOpenAI({ apiKey: 'sk-test' }));
    f.enqueue({ toolCalls: [{ name: 'lookup', arguments: { q: 'weather' } }] }, 'final answer');
    const first = (await (await complete(f, req('weather?'))).json()) as {
      choices: Array<{
        message: { content: string | null; tool_calls: Array<Record<string, unknown>> };
        finish_reason: string;
      }>;
    };
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls[0]).toMatchObject({
      type: 'function',
      function: { name: 'lookup', arguments: '{"q":"weather"}' },
    });
    expect(typeof choice.message.tool_calls[0]?.id).toBe('string');
    const second = (await (await complete(f, req('weather?'))).json()) as {
      choices: Array<{ message: { content: string } }>;
    };
    expect(second.choices[0]?.message.content).toBe('final answer');
    const third = (await (await complete(f, req('again'))).json()) as {
      choices: Array<{ message: { content: string } }>;
    };
    expect(third.choices[0]?.message.content).toBe('echo: again');
    f.setResponder((r) => ({ content: `n=${r.messages.length}` }));
    const fourth = (await (await complete(f, req('x'))).json()) as {
      choices: Array<{ message: { content: string } }>;
    };
    expect(fourth.choices[0]?.message.content).toBe('n=1');
  });

  it('requires the bearer key (401 OpenAI error)', async () => {
    const f = await track(startFakeOpenAI());
    const wrong = await complete(f, req('x'), 'sk-wrong');
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({
      error: { type: 'invalid_request_error', code: 'invalid_api_key' },
    });
    const none = await fetch(`${f.url}/v1/chat/completions`, json(req('x')));
    expect(none.status).toBe(401);
    expect(f.completions).toHaveLength(0);
  });

  /** The data lines of a server-sent-event answer, parsed ([DONE] as the string). */
  const events = async (res: Response) =>
    (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice('data: '.length))
      .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));

  it('stream:true → chat.completion.chunk events, a usage chunk when asked, then [DONE]', async () => {
    const f = await track(startFakeOpenAI());
    f.setStreamOptions({ chunkChars: 3 });
    const res = await complete(f, { ...req('hello'), stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const ev = await events(res);
    expect(ev.at(-1)).toBe('[DONE]');
    const chunks = ev.slice(0, -1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe('echo: hello');
    expect(chunks.at(-2).choices[0].finish_reason).toBe('stop');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: f.completions[0]!.response.usage });
    // Without include_usage: no usage chunk.
    const plain = await events(await complete(f, { ...req('x'), stream: true }));
    expect(plain.slice(0, -1).every((c) => c.choices.length === 1 && c.usage === undefined)).toBe(true);
  });

  it('streams tool calls as deltas, drops one stream mid-answer, and 429s a stream like a call', async () => {
    const f = await track(startFakeOpenAI());
    f.setStreamOptions({ chunkChars: 4, chunkDelayMs: 5 });
    f.enqueue({ toolCalls: [{ id: 'call_a', name: 'lookup', arguments: { q: 'weather' } }] });
    const chunks = (await events(await complete(f, { ...req('x'), stream: true }))).slice(0, -1);
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(deltas[0]).toMatchObject({ index: 0, id: 'call_a', function: { name: 'lookup' } });
    expect(deltas.map((d: { function: { arguments: string } }) => d.function.arguments).join('')).toBe(
      '{"q":"weather"}',
    );
    expect(chunks.at(-1).choices[0].finish_reason).toBe('tool_calls');

    f.dropNextStreamAfter(2);
    const dropped = await complete(f, { ...req('cut'), stream: true });
    await expect(dropped.text()).rejects.toThrow();
    expect(f.streamedChunks.at(-1)).toHaveLength(2);
    expect((await complete(f, { ...req('whole'), stream: true })).status).toBe(200);

    f.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const limited = await complete(f, { ...req('x'), stream: true });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
  });

  it('rate_limit → 429 with Retry-After and an OpenAI error body; status → server_error', async () => {
    const f = await track(startFakeOpenAI());
    f.faults.push({ kind: 'rate_limit', retryAfterSeconds: 2 }, { kind: 'status', status: 500 });
    const r = await complete(f, req('x'));
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('2');
    expect(await r.json()).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
    const s = await complete(f, req('x'));
    expect(s.status).toBe(500);
    expect(await s.json()).toMatchObject({ error: { type: 'server_error' } });
    expect(f.faultsInjected).toBe(2);
    expect(f.completions).toHaveLength(0);
  });
});
