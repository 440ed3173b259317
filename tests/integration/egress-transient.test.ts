import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type EgressResolver, setEgressResolver } from '../../lib/egress';
import { type RunningServer, startServer } from '../fakes/http';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { deadLettersOf, segmentsOf, waitForFinished } from '../helpers/delivery';
import { invocationsOfTenant, sendText } from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { orderToolAgent, seedTelegramTenant } from '../helpers/seed';

// Issue #11 item 6, end to end through the webhook and the worker: a DNS hiccup is a transient
// "not sent", retried until the name resolves (one delivery, nothing dead-lettered); a redirect
// is never followed and fails the send for good. The worker runs in this process, so the test
// resolver stands in for DNS on every connection it opens.
describe('transient egress failures, end to end', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    await h.startWorker();
  });
  afterEach(() => setEgressResolver(undefined));
  afterAll(async () => {
    await h?.close();
    await Promise.all([telegram?.close(), tools?.close()]);
  });

  /** The fake's URL with its host replaced by a name only the test resolver knows. */
  const named = (url: string, host: string) => {
    const u = new URL(url);
    u.hostname = host;
    return u.href.replace(/\/$/, '');
  };

  /** Fails `failures` lookups of `host` with EAI_AGAIN, then resolves every name to 127.0.0.1. */
  function flakyDns(host: string, failures: number) {
    const lookups: string[] = [];
    let left = failures;
    const resolver: EgressResolver = async (name) => {
      lookups.push(name);
      if (name === host && left > 0) {
        left--;
        throw Object.assign(new Error(`getaddrinfo EAI_AGAIN ${name}`), { code: 'EAI_AGAIN' });
      }
      return [{ address: '127.0.0.1', family: 4 }];
    };
    setEgressResolver(resolver);
    return { lookupsOf: (name: string) => lookups.filter((n) => n === name).length };
  }

  it('the Bot API host fails to resolve twice (EAI_AGAIN): the reply is delivered once, nothing is dead-lettered', async () => {
    const host = 'telegram.egress.test';
    const dns = flakyDns(host, 2);
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: named(telegram.url, host) });
    telegram.addBot(t.botToken);
    const chatId = 91_001;
    await sendText(h, t, chatId, 'hello through a flaky resolver');

    const [msg] = await waitForFinished(h, t.tenantId, 1, 45_000);
    expect(msg).toMatchObject({ status: 'replied', failure_reason: null });
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['You said: hello through a flaky resolver']);
    const segments = await segmentsOf(h, t.tenantId);
    expect(segments.map((s) => [s.status, s.last_error])).toEqual([['sent', null]]);
    expect(segments[0]!.attempts).toBeGreaterThanOrEqual(3);
    expect(await deadLettersOf(h, t.tenantId)).toEqual([]);
    // Two failed lookups and the one that connected; the failures never reached the fake.
    expect(dns.lookupsOf(host)).toBeGreaterThanOrEqual(3);
    expect(telegram.requests.filter((r) => r.token === t.botToken)).toHaveLength(1);
  });

  it('the tool endpoint fails to resolve once: the tool is applied once and the turn completes', async () => {
    const host = 'tools.egress.test';
    const dns = flakyDns(host, 1);
    const base = named(tools.url, host);
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      ...orderToolAgent(base),
    });
    telegram.addBot(t.botToken);
    const chatId = 91_002;
    await sendText(h, t, chatId, 'order widget');

    const [msg] = await waitForFinished(h, t.tenantId, 1, 45_000);
    expect(msg).toMatchObject({ status: 'replied' });
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['ordered widget']);
    const [invocation, ...more] = await invocationsOfTenant(h.sql, t.tenantId);
    expect(more).toEqual([]);
    expect(invocation).toMatchObject({ tool_name: 'order', status: 'accepted' });
    const effects = tools.effects.filter((e) => e.key === invocation!.idempotency_key);
    expect(effects.map((e) => e.args)).toEqual([{ item: 'widget' }]);
    // The failed lookup sent nothing: the provider saw exactly one POST for this key.
    expect(
      tools.requests.filter((r) => r.key === invocation!.idempotency_key && r.endpoint === 'tool'),
    ).toHaveLength(1);
    expect(dns.lookupsOf(host)).toBeGreaterThanOrEqual(2);
  });

  describe('a Bot API base that answers 307', () => {
    let redirector: RunningServer;
    const redirected: string[] = [];
    beforeAll(async () => {
      // Points every request at the real fake, on another 127.0.0.1 port.
      redirector = await startServer((req, res) => {
        redirected.push(req.url ?? '');
        req.resume();
        res.writeHead(307, { location: `${telegram.url}${req.url ?? '/'}` });
        res.end();
      });
    });
    afterAll(async () => {
      await redirector?.close();
    });

    it('is not followed: the target receives nothing and the segment fails as redirect_refused', async () => {
      setEgressResolver(async () => [{ address: '127.0.0.1', family: 4 }]);
      const t = await seedTelegramTenant(h.sql, h.secrets, {
        apiBaseUrl: named(redirector.url, 'redirect.egress.test'),
      });
      telegram.addBot(t.botToken);
      const chatId = 91_003;
      await sendText(h, t, chatId, 'hello, redirect');

      const [msg] = await waitForFinished(h, t.tenantId, 1, 30_000);
      expect(msg).toMatchObject({ status: 'failed', failure_reason: 'redirect_refused' });
      const segments = await segmentsOf(h, t.tenantId);
      expect(segments.map((s) => [s.status, s.last_error])).toEqual([['failed', 'redirect_refused']]);
      const dls = await deadLettersOf(h, t.tenantId);
      expect(dls.map((d) => [d.kind, d.reason_class, d.status])).toEqual([
        ['segment', 'redirect_refused', 'open'],
      ]);
      // Permanent: asked once, never retried, and the redirect's target saw nothing.
      expect(redirected.filter((p) => p.includes(t.botToken))).toHaveLength(1);
      expect(telegram.requests.filter((r) => r.token === t.botToken)).toEqual([]);
    });
  });
});
