import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callOpenAICompatible, ModelError } from '../../agents/openai';
import { dispatchToolCall } from '../../agents/tools';
import { telegramSendMessage } from '../../channels/telegram/client';
import { wecomSendText } from '../../channels/wecom/client';
import { WecomTokenCache } from '../../channels/wecom/token-cache';
import { isInternalAddress, setEgressPolicy } from '../../lib/egress';
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
  afterEach(() => setEgressPolicy('allow_private'));
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
});
