import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplyTarget } from '../../channels/inbound';
import { classifyWecomErrcode, type WecomSendInput, wecomSendText } from '../../channels/wecom/client';
import { WecomTokenCache } from '../../channels/wecom/token-cache';
import { type FakeWecom, startFakeWecom, type WecomApp } from '../fakes/wecom';

// The outbound WeCom client against the fake WeCom API: token cache (single flight, refresh on
// expiry), business error classification, and the duplicate check covering a resend after an
// unknown outcome.
describe('WeCom outbound client', () => {
  let fake: FakeWecom;

  beforeAll(async () => {
    fake = await startFakeWecom();
  });
  afterAll(async () => {
    await fake?.close();
  });

  const newApp = (): WecomApp => {
    const app = {
      corpId: `ww${randomBytes(8).toString('hex')}`,
      corpSecret: randomBytes(24).toString('base64url'),
      agentId: 1000000 + Math.floor(Math.random() * 1e6),
    };
    fake.addApp(app);
    return app;
  };
  const direct = (userId: string): ReplyTarget => ({
    chatId: userId,
    chatType: 'direct',
    threadId: null,
    userId,
  });
  const group = (chatId: string): ReplyTarget => ({
    chatId,
    chatType: 'group',
    threadId: null,
    userId: 'someone',
  });
  const input = (
    app: WecomApp,
    cache: WecomTokenCache,
    target: ReplyTarget,
    text: string,
    extra: Partial<WecomSendInput> = {},
  ): WecomSendInput => ({
    apiBaseUrl: fake.url,
    corpId: app.corpId,
    corpSecret: app.corpSecret,
    agentId: app.agentId,
    target,
    text,
    timeoutMs: 2000,
    tokenCache: cache,
    ...extra,
  });
  const noSecrets = (app: WecomApp, value: unknown) => {
    const s = JSON.stringify(value);
    expect(s).not.toContain(app.corpSecret);
    expect(s).not.toContain('fake-wecom-');
  };

  it('sends a direct message with message/send and a group message with appchat/send, one gettoken', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    const a = await wecomSendText(input(app, cache, direct('zhangsan'), 'hello'));
    const b = await wecomSendText(input(app, cache, group('wrchat-9'), 'hello group'));
    expect(a).toMatchObject({ kind: 'sent' });
    expect(b).toMatchObject({ kind: 'sent' });
    noSecrets(app, [a, b]);
    expect(fake.tokenCalls(app.corpId)).toBe(1);

    const [toUser] = fake.deliveredTo('zhangsan');
    expect(toUser).toMatchObject({ endpoint: 'message/send', agentId: app.agentId, content: 'hello' });
    expect(a.kind === 'sent' && a.providerMessageId).toBe(toUser!.msgid);
    expect(fake.deliveredTo('wrchat-9')[0]).toMatchObject({
      endpoint: 'appchat/send',
      content: 'hello group',
    });
    const sendReq = fake.requests.find((r) => r.endpoint === 'message/send' && r.corpId === app.corpId)!;
    expect(sendReq.body).toMatchObject({
      touser: 'zhangsan',
      msgtype: 'text',
      agentid: app.agentId,
      text: { content: 'hello' },
      enable_duplicate_check: 1,
      duplicate_check_interval: 900,
    });
  });

  it('token expiry mid-run with 20 concurrent sends: exactly one extra gettoken, all delivered', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    expect(await wecomSendText(input(app, cache, direct('u0'), 'warm up'))).toMatchObject({ kind: 'sent' });
    expect(fake.tokenCalls(app.corpId)).toBe(1);

    fake.expireTokens();
    const before = fake.requests.length;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        wecomSendText(input(app, cache, direct(`u${i + 1}`), `message ${i}`)),
      ),
    );
    expect(results.map((r) => r.kind)).toEqual(Array(20).fill('sent'));
    expect(fake.tokenCalls(app.corpId)).toBe(2);
    for (let i = 1; i <= 20; i++) expect(fake.deliveredTo(`u${i}`)).toHaveLength(1);
    const rejected = fake.requests.slice(before).filter((r) => r.errcode === 42001);
    expect(rejected).toHaveLength(20);
    expect(fake.duplicatesDelivered).toBe(0);
  });

  it('concurrent first sends share one gettoken (single flight)', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => wecomSendText(input(app, cache, direct(`sf${i}`), 'hi'))),
    );
    expect(results.every((r) => r.kind === 'sent')).toBe(true);
    expect(fake.tokenCalls(app.corpId)).toBe(1);
    expect(cache.fetches).toBe(1);
  });

  it('45009 is retryable with back-off; 81013 is a permanent invalid_user; 86003 chat_not_found', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    fake.faults.push({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const limited = await wecomSendText(input(app, cache, direct('zhaoliu'), 'busy?'));
    expect(limited).toMatchObject({ kind: 'retryable', reasonClass: 'rate_limited' });
    expect(limited.kind === 'retryable' && limited.retryAfterMs).toBeGreaterThanOrEqual(1000);

    fake.invalidUser('ghost');
    expect(await wecomSendText(input(app, cache, direct('ghost'), 'boo'))).toEqual({
      kind: 'permanent',
      reasonClass: 'invalid_user',
    });
    fake.missingChat('wrchat-gone');
    expect(await wecomSendText(input(app, cache, group('wrchat-gone'), 'anyone?'))).toEqual({
      kind: 'permanent',
      reasonClass: 'chat_not_found',
    });
    expect(await wecomSendText(input(app, cache, direct('zhaoliu'), ''))).toEqual({
      kind: 'permanent',
      reasonClass: 'bad_content',
    });
    expect(await wecomSendText(input(app, cache, direct('zhaoliu'), 'x'.repeat(2049)))).toEqual({
      kind: 'permanent',
      reasonClass: 'bad_content',
    });
  });

  it('a wrong corp secret is a permanent invalid_credential and never reuses another secret’s token', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    expect(await wecomSendText(input(app, cache, direct('a'), 'ok'))).toMatchObject({ kind: 'sent' });
    const wrong = { ...app, corpSecret: `${app.corpSecret}x` };
    const res = await wecomSendText(input(wrong, cache, direct('a'), 'sneaky'));
    expect(res).toEqual({ kind: 'permanent', reasonClass: 'invalid_credential' });
    expect(fake.deliveredTo('a').map((d) => d.content)).toEqual(['ok']);
  });

  it('apply_then_drop is unknown; a resend of the same content within the interval is suppressed by WeCom', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    // Warm the token so the fault hits the send, not gettoken.
    expect(await wecomSendText(input(app, cache, direct('warm'), 'warm'))).toMatchObject({ kind: 'sent' });
    fake.faults.push({ kind: 'apply_then_drop' });
    const first = await wecomSendText(input(app, cache, direct('qianqi'), 'the answer is 42'));
    expect(first).toEqual({ kind: 'unknown', reasonClass: 'connection_dropped' });
    expect(fake.deliveredTo('qianqi')).toHaveLength(1);

    const suppressedBefore = fake.duplicatesSuppressed;
    const resend = await wecomSendText(input(app, cache, direct('qianqi'), 'the answer is 42'));
    expect(resend).toEqual({ kind: 'sent', providerMessageId: fake.deliveredTo('qianqi')[0]!.msgid });
    expect(fake.duplicatesSuppressed).toBe(suppressedBefore + 1);
    expect(fake.deliveredTo('qianqi')).toHaveLength(1);
    expect(fake.duplicatesDelivered).toBe(0);
  });

  it('a send that times out is unknown; a refused connection is retryable', async () => {
    const app = newApp();
    const cache = new WecomTokenCache();
    expect(await wecomSendText(input(app, cache, direct('warm2'), 'warm'))).toMatchObject({ kind: 'sent' });
    fake.faults.push({ kind: 'timeout', ms: 2000 });
    const timedOut = await wecomSendText(input(app, cache, direct('slow'), 'tick', { timeoutMs: 200 }));
    expect(timedOut).toEqual({ kind: 'unknown', reasonClass: 'timeout' });

    const port = await closedPort();
    const refused = await wecomSendText(
      input(app, new WecomTokenCache(), direct('nobody'), 'hello?', {
        apiBaseUrl: `http://127.0.0.1:${port}`,
      }),
    );
    expect(refused.kind).toBe('retryable');
    noSecrets(app, [timedOut, refused]);
  });

  it('classifies WeCom business error codes', () => {
    expect(classifyWecomErrcode(-1)).toMatchObject({ kind: 'retryable', retryAfterMs: 1000 });
    for (const code of [45009, 45033, 45047]) expect(classifyWecomErrcode(code).kind).toBe('retryable');
    for (const [code, cls] of [
      [81013, 'invalid_user'],
      [60111, 'invalid_user'],
      [40003, 'invalid_user'],
      [86003, 'chat_not_found'],
      [86004, 'chat_not_found'],
      [40001, 'invalid_credential'],
      [40013, 'invalid_credential'],
      [41002, 'invalid_credential'],
      [40056, 'invalid_credential'],
      [45002, 'bad_content'],
      [44004, 'bad_content'],
      [99999, 'errcode_99999'],
    ] as const) {
      expect(classifyWecomErrcode(code)).toEqual({ kind: 'permanent', reasonClass: cls });
    }
  });
});

function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}
