import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callOpenAICompatible, ModelError } from '../../agents/openai';
import { dispatchToolCall, fetchToolReceipt } from '../../agents/tools';
import { telegramSendMessage } from '../../channels/telegram/client';
import { wecomSendText } from '../../channels/wecom/client';
import { WecomTokenCache } from '../../channels/wecom/token-cache';
import { type EgressResolver, isInternalAddress, setEgressPolicy, setEgressResolver } from '../../lib/egress';
import { type RunningServer, startServer } from '../fakes/http';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';

// Tenants configure outbound URLs. Under `public_only` (the worker's default) a URL that points at
// the worker's own network is refused before any byte is sent, on every outbound path.
describe('egress policy', () => {
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let openai: FakeOpenAI;
  let wecom: FakeWecom;
  beforeAll(async () => {
    [telegram, tools, openai, wecom] = await Promise.all([
      startFakeTelegram(),
      startFakeToolProvider(),
      startFakeOpenAI(),
      startFakeWecom(),
    ]);
  });
  afterEach(() => {
    setEgressPolicy('allow_private');
    setEgressResolver(undefined);
  });
  afterAll(async () => {
    await Promise.all([telegram?.close(), tools?.close(), openai?.close(), wecom?.close()]);
  });

  it('classifies internal addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.20.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '0.0.0.0',
    ]) {
      expect(isInternalAddress(a), a).toBe(true);
    }
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700::1111'])
      expect(isInternalAddress(a), a).toBe(false);
  });

  it('public_only refuses internal targets on every outbound path, and nothing reaches them', async () => {
    setEgressPolicy('public_only');
    const token = '123456:EGRESS';
    telegram.addBot(token);
    const tg = await telegramSendMessage({
      apiBaseUrl: telegram.url,
      botToken: token,
      chatId: '1',
      threadId: null,
      text: 'hi',
      timeoutMs: 2000,
    });
    expect(tg).toEqual({ kind: 'permanent', reasonClass: 'egress_denied' });

    const tool = await dispatchToolCall({
      url: `${tools.url}/tools/x`,
      idempotencyKey: 'k1',
      args: {},
      timeoutMs: 2000,
    });
    expect(tool).toMatchObject({ kind: 'rejected', body: { error: 'egress_denied' } });

    const model = await callOpenAICompatible({
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
      model: 'm',
      system: 's',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
      timeoutMs: 2000,
    }).catch((e: unknown) => e);
    expect(model).toBeInstanceOf(ModelError);
    expect(model).toMatchObject({ retryable: false, reasonClass: 'egress_denied' });

    wecom.addApp({ corpId: 'corp', corpSecret: 'secret', agentId: 1 });
    const wc = await wecomSendText({
      apiBaseUrl: wecom.url,
      corpId: 'corp',
      corpSecret: 'secret',
      agentId: 1,
      target: { chatId: 'u1', chatType: 'direct', threadId: null, userId: 'u1' },
      text: 'hi',
      timeoutMs: 2000,
      tokenCache: new WecomTokenCache(),
    });
    expect(wc).toEqual({ kind: 'permanent', reasonClass: 'egress_denied' });

    expect(telegram.requests).toHaveLength(0);
    expect(tools.requests).toHaveLength(0);
    expect(openai.requests).toHaveLength(0);
    expect(wecom.requests).toHaveLength(0);
  });

  it('allow_private (the embedded default) lets local sandboxes through', async () => {
    const token = '654321:EGRESS';
    telegram.addBot(token);
    const tg = await telegramSendMessage({
      apiBaseUrl: telegram.url,
      botToken: token,
      chatId: '2',
      threadId: null,
      text: 'hi',
      timeoutMs: 2000,
    });
    expect(tg.kind).toBe('sent');
  });

  // ------------------------------------------------------------------------------------------
  // The check happens where the socket connects (the injected resolver stands in for DNS), a
  // failure to resolve or connect is transient and never "unknown", and redirects are refused.
  // ------------------------------------------------------------------------------------------

  /** The same fake addressed by a host name only the test resolver knows. */
  const named = (url: string, host: string) => {
    const u = new URL(url);
    u.hostname = host;
    return u.href.replace(/\/$/, '');
  };
  const loopback: EgressResolver = async () => [{ address: '127.0.0.1', family: 4 }];
  const failing =
    (code: string): EgressResolver =>
    async (host) => {
      throw Object.assign(new Error(`getaddrinfo ${code} ${host}`), { code });
    };
  const TG_TOKEN = '777777:EGRESS';
  const APP = { corpId: 'corp-egress', corpSecret: 'secret-egress', agentId: 7 };
  let key = 0;

  interface Targets {
    telegram: string;
    tools: string;
    openai: string;
    wecom: string;
  }
  const namedTargets = (): Targets => ({
    telegram: named(telegram.url, 'telegram.egress.test'),
    tools: named(tools.url, 'tools.egress.test'),
    openai: named(openai.baseURL, 'openai.egress.test'),
    wecom: named(wecom.url, 'wecom.egress.test'),
  });
  const requestCounts = () => [
    telegram.requests.length,
    tools.requests.length,
    openai.requests.length,
    wecom.requests.length,
  ];

  /** One call on each outbound path: Telegram send, tool dispatch, receipt, model, WeCom send. */
  async function callEveryPath(to: Targets, timeoutMs = 2000) {
    telegram.addBot(TG_TOKEN);
    wecom.addApp(APP);
    const idempotencyKey = `egress-${process.pid}-${key++}`;
    return {
      telegram: await telegramSendMessage({
        apiBaseUrl: to.telegram,
        botToken: TG_TOKEN,
        chatId: '5',
        threadId: null,
        text: 'hi',
        timeoutMs,
      }),
      tool: await dispatchToolCall({ url: `${to.tools}/tools/x`, idempotencyKey, args: {}, timeoutMs }),
      receipt: await fetchToolReceipt({
        receiptUrlTemplate: `${to.tools}/receipts/{key}`,
        idempotencyKey,
        timeoutMs,
      }),
      model: await callOpenAICompatible({
        baseUrl: to.openai,
        apiKey: openai.apiKey,
        model: 'm',
        system: 's',
        messages: [{ role: 'user', content: 'hi' }],
        tools: [],
        timeoutMs,
      }).catch((e: unknown) => e),
      wecom: await wecomSendText({
        apiBaseUrl: to.wecom,
        ...APP,
        target: { chatId: 'u5', chatType: 'direct', threadId: null, userId: 'u5' },
        text: 'hi',
        timeoutMs,
        tokenCache: new WecomTokenCache(),
      }),
    };
  }

  it('allow_private connects every path through the injected resolver', async () => {
    const asked: string[] = [];
    setEgressResolver(async (host) => {
      asked.push(host);
      return [{ address: '127.0.0.1', family: 4 }];
    });
    const out = await callEveryPath(namedTargets());
    expect(out.telegram.kind).toBe('sent');
    expect(out.tool.kind).toBe('accepted');
    expect(out.receipt.kind).toBe('found');
    expect(out.model).toMatchObject({ kind: 'reply' });
    expect(out.wecom.kind).toBe('sent');
    expect(new Set(asked)).toEqual(
      new Set(['telegram.egress.test', 'tools.egress.test', 'openai.egress.test', 'wecom.egress.test']),
    );
  });

  it('public_only refuses a host name that resolves to an internal address, when connecting', async () => {
    setEgressResolver(loopback);
    setEgressPolicy('public_only');
    const before = requestCounts();
    const out = await callEveryPath(namedTargets());
    expect(out.telegram).toEqual({ kind: 'permanent', reasonClass: 'egress_denied' });
    expect(out.tool).toMatchObject({ kind: 'rejected', body: { error: 'egress_denied' } });
    expect(out.receipt).toEqual({ kind: 'error', reason: 'receipt_egress_denied' });
    expect(out.model).toMatchObject({ retryable: false, reasonClass: 'egress_denied' });
    expect(out.wecom).toEqual({ kind: 'permanent', reasonClass: 'egress_denied' });
    expect(requestCounts()).toEqual(before);
  });

  it.each(['EAI_AGAIN', 'ETIMEOUT', 'ECONNRESET', 'ESERVFAIL', 'ECONNREFUSED', 'ENOTFOUND'])(
    'a resolver failure (%s) is retryable "not sent" on every path, even under public_only',
    async (code) => {
      setEgressResolver(failing(code));
      setEgressPolicy('public_only');
      const before = requestCounts();
      const out = await callEveryPath(namedTargets());
      expect(out.telegram).toEqual({ kind: 'retryable', reasonClass: 'egress_unavailable' });
      expect(out.tool).toEqual({ kind: 'not_sent', reason: 'egress_unavailable' });
      expect(out.receipt).toEqual({ kind: 'error', reason: 'receipt_egress_unavailable' });
      expect(out.model).toBeInstanceOf(ModelError);
      expect(out.model).toMatchObject({ retryable: true, reasonClass: 'egress_unavailable' });
      expect((out.model as Error).message).toContain(code);
      expect(out.wecom).toEqual({ kind: 'retryable', reasonClass: 'egress_unavailable' });
      expect(requestCounts()).toEqual(before);
    },
  );

  it('a refused connection is retryable "not sent" on every path', async () => {
    const closed = await startServer(() => undefined);
    await closed.close();
    const url = closed.url;
    const out = await callEveryPath({ telegram: url, tools: url, openai: `${url}/v1`, wecom: url });
    expect(out.telegram).toEqual({ kind: 'retryable', reasonClass: 'egress_unavailable' });
    expect(out.tool).toEqual({ kind: 'not_sent', reason: 'egress_unavailable' });
    expect(out.receipt).toEqual({ kind: 'error', reason: 'receipt_egress_unavailable' });
    expect(out.model).toMatchObject({ retryable: true, reasonClass: 'egress_unavailable' });
    expect(out.wecom).toEqual({ kind: 'retryable', reasonClass: 'egress_unavailable' });
  });

  it('WeCom: a send whose host stops resolving after the token was fetched is retryable, not unknown', async () => {
    setEgressResolver(loopback);
    wecom.addApp(APP);
    const cache = new WecomTokenCache();
    const send = (text: string) =>
      wecomSendText({
        apiBaseUrl: named(wecom.url, 'wecom.egress.test'),
        ...APP,
        target: { chatId: 'u6', chatType: 'direct', threadId: null, userId: 'u6' },
        text,
        timeoutMs: 2000,
        tokenCache: cache,
      });
    expect((await send('first')).kind).toBe('sent');
    const before = wecom.requests.length;
    setEgressResolver(failing('EAI_AGAIN')); // also drops the open connections
    expect(await send('second')).toEqual({ kind: 'retryable', reasonClass: 'egress_unavailable' });
    expect(cache.fetches).toBe(1);
    expect(wecom.requests.length).toBe(before);
  });

  it('a lookup that hangs ends with the call’s own deadline, as "not sent"', async () => {
    const signals: AbortSignal[] = [];
    setEgressResolver((_host, { signal }) => {
      signals.push(signal);
      return new Promise(() => undefined);
    });
    const started = Date.now();
    const tg = await telegramSendMessage({
      apiBaseUrl: named(telegram.url, 'telegram.egress.test'),
      botToken: TG_TOKEN,
      chatId: '5',
      threadId: null,
      text: 'hi',
      timeoutMs: 300,
    });
    expect(tg).toEqual({ kind: 'retryable', reasonClass: 'egress_unavailable' });
    const tool = await dispatchToolCall({
      url: `${named(tools.url, 'tools.egress.test')}/tools/x`,
      idempotencyKey: `egress-hang-${process.pid}`,
      args: {},
      timeoutMs: 300,
    });
    expect(tool).toEqual({ kind: 'not_sent', reason: 'egress_unavailable' });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(signals).toHaveLength(2);
    expect(signals.every((s) => s.aborted)).toBe(true);
  });

  describe('a redirect', () => {
    let target: RunningServer;
    let redirector: RunningServer;
    const targetHits: string[] = [];
    const redirected: string[] = [];
    beforeAll(async () => {
      target = await startServer((req, res) => {
        targetHits.push(req.url ?? '');
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true,"errcode":0,"access_token":"t","expires_in":7200}');
      });
      redirector = await startServer((req, res) => {
        redirected.push(req.url ?? '');
        req.resume();
        res.writeHead(307, { location: `${target.url}${req.url ?? '/'}` });
        res.end();
      });
    });
    afterAll(async () => {
      await Promise.all([target?.close(), redirector?.close()]);
    });

    it('is never followed, on any path, and is a permanent redirect_refused', async () => {
      const via = redirector.url;
      const out = await callEveryPath({ telegram: via, tools: via, openai: `${via}/v1`, wecom: via });
      expect(out.telegram).toEqual({ kind: 'permanent', reasonClass: 'redirect_refused' });
      // The POST reached a server that may have applied it: unknown, reconciled by its key.
      expect(out.tool).toEqual({ kind: 'unknown', reason: 'redirect_refused' });
      expect(out.receipt).toEqual({ kind: 'error', reason: 'receipt_redirect_refused' });
      expect(out.model).toBeInstanceOf(ModelError);
      expect(out.model).toMatchObject({ retryable: false, reasonClass: 'redirect_refused', statusCode: 307 });
      expect(out.wecom).toEqual({ kind: 'permanent', reasonClass: 'redirect_refused' });
      // One request per path reached the redirector (nothing retried), none its target.
      expect(redirected).toHaveLength(5);
      expect(targetHits).toEqual([]);
    });
  });
});
