import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callOpenAICompatible, MODEL_MAX_RESPONSE_BYTES, ModelError } from '../../agents/openai';
import { dispatchToolCall, fetchToolReceipt } from '../../agents/tools';
import { CHANNEL_MAX_RESPONSE_BYTES } from '../../channels/send-result';
import { telegramSendMessage } from '../../channels/telegram/client';
import { wecomSendText } from '../../channels/wecom/client';
import { WecomTokenCache } from '../../channels/wecom/token-cache';
import {
  cappedEgressFetch,
  EgressBodyTooLargeError,
  EgressDeniedError,
  EgressRedirectError,
  type EgressResolver,
  EgressUnavailableError,
  egressFetch,
  setEgressPolicy,
  setEgressResolver,
} from '../../lib/egress';
import { MODEL_FAILED_REPLY } from '../../workflows/shared';
import {
  type FloodAnswer,
  type FloodRecord,
  type HostileRoute,
  type HostileServer,
  startHostile,
  startRedirector,
  startTrap,
} from '../fakes/hostile';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { setupTenant } from '../helpers/admin';
import { deadLettersOf, segmentsOf, waitForFinished } from '../helpers/delivery';
import {
  activitiesOf,
  auditOfTenant,
  createOpenAIProfile,
  finished,
  invocationsOfTenant,
  publishRevision,
  routeOf,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { orderToolAgent, seedTelegramTenant } from '../helpers/seed';

// Issue #13 part 2: egress that holds on every hop. Under `public_only` nothing a tenant configures
// reaches the worker's own network — not by an IP spelled another way, not by a name that resolves
// there (first or on a later lookup), not through a kept-alive socket or an environment proxy, not
// by a redirect; and under any policy a peer's answer is read with a cap, so an endless body costs
// the worker a bounded amount of memory and ends in a failure class of its own on every caller.
//
// A local server is refused under public_only, so the policy is tested with traps that must see
// nothing, and the caps (and the refusal to follow redirects, which holds under any policy) under
// allow_private, the embedded default.

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** "Well before 1 GB": the cap plus what the socket buffers hold when the peer hangs up. */
const CLOSED_EARLY_BYTES = 64 * MiB;

afterEach(() => {
  setEgressPolicy('allow_private');
  setEgressResolver(undefined);
});

/** A resolver that records each lookup and answers by its ordinal (0 for the first). */
function countingResolver(answer: (host: string, n: number) => string[]) {
  const lookups: string[] = [];
  const resolver: EgressResolver = async (host) => {
    const n = lookups.length;
    lookups.push(host);
    return answer(host, n).map((address) => ({ address }));
  };
  setEgressResolver(resolver);
  return lookups;
}

const errorOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('egress SSRF corpus', () => {
  let trap: HostileServer;
  beforeAll(async () => {
    trap = await startTrap();
  });
  afterAll(async () => {
    await trap?.close();
  });

  describe('under public_only, an internal target is refused before anything reaches it', () => {
    // Every spelling of 127.0.0.1 the URL parser accepts is the trap itself: allow_private reaches
    // it (so the refusal below is of the trap, not of an address that goes nowhere).
    const loopbackForms = [
      'http://2130706433',
      'http://0177.0.0.1',
      'http://0x7f.1',
      'http://0x7f000001',
      'http://127.1',
      'http://127.0.0.1.',
      'http://[::ffff:7f00:1]',
      'http://[::ffff:127.0.0.1]',
    ];

    it('each spelling of 127.0.0.1 reaches the trap under allow_private, and is refused under public_only', async () => {
      const reached = trap.requests.length;
      for (const form of loopbackForms) {
        const res = await egressFetch(`${form}:${trap.port}/reach`, { maxResponseBytes: 1024 });
        expect(res.status, form).toBe(200);
        await res.text();
      }
      expect(trap.requests.length - reached).toBe(loopbackForms.length);

      const lookups = countingResolver(() => ['93.184.216.34']);
      setEgressPolicy('public_only');
      const before = trap.requests.length;
      for (const form of loopbackForms) {
        const err = await errorOf(egressFetch(`${form}:${trap.port}/refused`, { maxResponseBytes: 1024 }));
        expect(err, form).toBeInstanceOf(EgressDeniedError);
      }
      expect(lookups).toEqual([]);
      expect(trap.requests.length).toBe(before);
    });

    it.each([
      ['loopback', '127.0.0.1'],
      ['loopback, elsewhere in 127/8', '127.9.9.9'],
      ['this network', '0.0.0.0'],
      ['private 10/8', '10.0.0.1'],
      ['private 172.16/12', '172.16.0.1'],
      ['private 192.168/16', '192.168.1.1'],
      ['metadata (link-local)', '169.254.169.254'],
      ['shared address space', '100.64.0.1'],
      ['IPv6 loopback', '::1'],
      ['IPv6 unspecified', '::'],
      ['unique local', 'fd00::1'],
      ['link-local', 'fe80::1'],
      ['IPv4-mapped, hex', '::ffff:7f00:1'],
      ['IPv4-mapped, dotted', '::ffff:127.0.0.1'],
      ['NAT64 of loopback', '64:ff9b::7f00:1'],
      ['NAT64 of the metadata address', '64:ff9b::a9fe:a9fe'],
      ['6to4 of loopback', '2002:7f00:1::1'],
      ['6to4 of a private address', '2002:a00:1::1'],
    ])('a name that resolves to %s (%s) is refused when connecting', async (_what, address) => {
      const lookups = countingResolver(() => [address]);
      setEgressPolicy('public_only');
      const before = trap.requests.length;
      const err = await errorOf(
        egressFetch(`http://internal.egress.test:${trap.port}/`, { maxResponseBytes: 1024 }),
      );
      expect(err).toBeInstanceOf(EgressDeniedError);
      expect(lookups).toEqual(['internal.egress.test']);
      expect(trap.requests.length).toBe(before);
    });

    it('a name with one internal address among public ones is refused (whichever the socket would try)', async () => {
      countingResolver(() => ['93.184.216.34', '127.0.0.1', '2606:4700::1111']);
      setEgressPolicy('public_only');
      const before = trap.requests.length;
      const err = await errorOf(
        egressFetch(`http://mixed.egress.test:${trap.port}/`, { maxResponseBytes: 1024 }),
      );
      expect(err).toBeInstanceOf(EgressDeniedError);
      expect(trap.requests.length).toBe(before);
    });

    it('localhost, resolved by the system resolver, is refused', async () => {
      setEgressPolicy('public_only');
      const before = trap.requests.length;
      const err = await errorOf(egressFetch(`http://localhost:${trap.port}/`, { maxResponseBytes: 1024 }));
      expect(err).toBeInstanceOf(EgressDeniedError);
      expect(trap.requests.length).toBe(before);
    });
  });

  describe('the address connected is the address checked', () => {
    it('a name that resolves public first and 127.0.0.1 next: one lookup per connection, the internal answer refused, nothing reaches the trap', async () => {
      // 192.0.2.1 (TEST-NET-1) is public as far as the policy goes and routes nowhere: the first
      // call connects there (and fails, as not sent); it never resolves the name again to connect.
      const lookups = countingResolver((_host, n) => [n === 0 ? '192.0.2.1' : '127.0.0.1']);
      setEgressPolicy('public_only');
      const url = `http://rebind.egress.test:${trap.port}/rebind`;

      const first = await errorOf(
        egressFetch(url, { maxResponseBytes: 1024, signal: AbortSignal.timeout(1500) }),
      );
      expect(first).toBeInstanceOf(EgressUnavailableError);
      expect(lookups).toHaveLength(1);
      // Where the socket error names the address it tried, it is the checked one.
      for (const address of addressesAlong(first)) expect(address).toBe('192.0.2.1');

      const second = await errorOf(egressFetch(url, { maxResponseBytes: 1024 }));
      expect(second).toBeInstanceOf(EgressDeniedError);
      expect(lookups).toEqual(['rebind.egress.test', 'rebind.egress.test']);
      expect(trap.requests.filter((r) => r.path === '/rebind')).toEqual([]);
    });

    it('the socket goes to the answer of the one lookup, not to a second resolution (127.0.0.2 vs 127.0.0.1, same port)', async () => {
      // Two servers on one port: the checked answer (127.0.0.2) and what a second resolution would
      // give (127.0.0.1). Only the first may see the request.
      const { checked, other } = await twoServersOnOnePort();
      try {
        const lookups = countingResolver((_host, n) => [n === 0 ? '127.0.0.2' : '127.0.0.1']);
        const res = await egressFetch(`http://pinned.egress.test:${checked.port}/pinned`, {
          maxResponseBytes: 1024,
        });
        expect(res.status).toBe(200);
        await res.text();
        expect(lookups).toHaveLength(1);
        expect(checked.requests.map((r) => r.path)).toEqual(['/pinned']);
        expect(other.requests).toEqual([]);
      } finally {
        await Promise.all([checked.close(), other.close()]);
      }
    });

    it('a kept-alive socket opened under allow_private does not serve a call made under public_only', async () => {
      const lookups = countingResolver(() => ['127.0.0.1']);
      const url = `http://keepalive.egress.test:${trap.port}/kept`;
      for (let i = 0; i < 2; i++) {
        const res = await egressFetch(url, { maxResponseBytes: 1024 });
        await res.text();
        // undici hands the socket back to the pool a moment after the body ends.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // The second call reused the first one's socket (no new lookup): keep-alive is on.
      expect(lookups).toHaveLength(1);
      expect(trap.requests.filter((r) => r.path === '/kept')).toHaveLength(2);

      setEgressPolicy('public_only');
      const err = await errorOf(egressFetch(url, { maxResponseBytes: 1024 }));
      expect(err).toBeInstanceOf(EgressDeniedError);
      // A fresh connection, looked up and checked again; the kept socket was not used.
      expect(lookups).toHaveLength(2);
      expect(trap.requests.filter((r) => r.path === '/kept')).toHaveLength(2);
    });

    it('HTTP(S)_PROXY and ALL_PROXY are never used (a proxy would be checked in place of the target)', async () => {
      const proxy = await startTrap();
      const names = ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'];
      const saved = names.map((name) => [name, process.env[name]] as const);
      try {
        for (const name of names) process.env[name] = proxy.url;
        countingResolver(() => ['127.0.0.1']);
        const res = await egressFetch(`http://direct.egress.test:${trap.port}/direct`, {
          maxResponseBytes: 1024,
        });
        await res.text();
        // Reached directly: an origin-form request line, not a proxy's absolute form.
        expect(trap.requests.filter((r) => r.path === '/direct')).toHaveLength(1);

        setEgressPolicy('public_only');
        const err = await errorOf(
          egressFetch(`http://proxied.egress.test:${trap.port}/proxied`, { maxResponseBytes: 1024 }),
        );
        expect(err).toBeInstanceOf(EgressDeniedError);
        expect(proxy.requests).toEqual([]);
      } finally {
        for (const [name, value] of saved) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
        await proxy.close();
      }
    });
  });

  describe('redirects are never followed', () => {
    // The redirector must be reachable, so this runs under allow_private: not following holds
    // under any policy, and there even a target the policy would allow gets nothing.
    const targets = (port: number) => [
      `http://127.0.0.1:${port}/redirected`,
      'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
      `http://[::ffff:7f00:1]:${port}/redirected`,
    ];

    it.each([301, 302, 303, 307, 308])(
      'HTTP %i to loopback, metadata or mapped loopback: EgressRedirectError, the target gets nothing',
      async (status) => {
        for (const target of targets(trap.port)) {
          const redirector = await startRedirector(status, () => target);
          try {
            for (const method of ['GET', 'POST']) {
              const err = await errorOf(
                egressFetch(`${redirector.url}/start`, {
                  method,
                  ...(method === 'POST' ? { body: '{}' } : {}),
                  // What a caller asks for does not matter: redirects are not followed.
                  redirect: 'follow',
                  maxResponseBytes: 1024,
                }),
              );
              expect(err, `${method} → ${target}`).toBeInstanceOf(EgressRedirectError);
              expect(err).toMatchObject({ status });
            }
            expect(redirector.requests).toHaveLength(2);
          } finally {
            await redirector.close();
          }
        }
        expect(trap.requests.filter((r) => r.path.startsWith('/redirected'))).toEqual([]);
      },
    );

    it('a redirect with an endless body is refused without reading it', async () => {
      const redirector = await startHostile(() => ({
        kind: 'flood',
        status: 307,
        headers: { location: `${trap.url}/redirected` },
      }));
      try {
        const err = await errorOf(egressFetch(`${redirector.url}/`, { maxResponseBytes: MiB }));
        expect(err).toBeInstanceOf(EgressRedirectError);
        const [flood] = redirector.floods;
        await flood!.over;
        expect(flood).toMatchObject({ closedByPeer: true });
        expect(flood!.written).toBeLessThan(CLOSED_EARLY_BYTES);
      } finally {
        await redirector.close();
      }
      expect(trap.requests.filter((r) => r.path.startsWith('/redirected'))).toEqual([]);
    });
  });

  describe('every response body is read with a cap', () => {
    let hostile: HostileServer;
    let route: HostileRoute = () => ({ kind: 'json', body: {} });
    beforeAll(async () => {
      hostile = await startHostile((req) => route(req));
    });
    afterAll(async () => {
      await hostile?.close();
    });
    /** The flood answered to the last request, once it is over. */
    const lastFlood = async (): Promise<FloodRecord> => {
      const f = hostile.floods.at(-1)!;
      await f.over;
      return f;
    };
    const floodWith = (o: Omit<FloodAnswer, 'kind'> = {}) => {
      route = () => ({ kind: 'flood', ...o });
    };

    it('a body of exactly the cap is read; one byte more is refused', async () => {
      const cap = 200_000;
      for (const [bytes, declared] of [
        [cap, false],
        [cap, true],
        [cap + 1, false],
        [cap + 1, true],
      ] as const) {
        floodWith({
          unit: 'x'.repeat(1000),
          limitBytes: bytes,
          ...(declared ? { contentLength: bytes } : {}),
        });
        const outcome = await egressFetch(`${hostile.url}/exact`, { maxResponseBytes: cap })
          .then((r) => r.text())
          .then(
            (t) => t.length,
            (e: unknown) => e,
          );
        if (bytes <= cap) expect(outcome, `${bytes} declared=${declared}`).toBe(bytes);
        else expect(outcome, `${bytes} declared=${declared}`).toBeInstanceOf(EgressBodyTooLargeError);
      }
    });

    it('an endpoint streaming 1 GB: refused past the cap, the socket closed well before 1 GB, memory bounded', async () => {
      floodWith({ limitBytes: GiB });
      const base = process.memoryUsage();
      let peakRss = base.rss;
      let peakHeap = base.heapUsed;
      const sampler = setInterval(() => {
        const m = process.memoryUsage();
        peakRss = Math.max(peakRss, m.rss);
        peakHeap = Math.max(peakHeap, m.heapUsed);
      }, 5);
      const started = Date.now();
      try {
        const res = await egressFetch(`${hostile.url}/gigabyte`, {
          maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
        });
        expect(res.status).toBe(200);
        const err = await errorOf(res.text());
        expect(err).toBeInstanceOf(EgressBodyTooLargeError);
        expect(err).toMatchObject({ limitBytes: CHANNEL_MAX_RESPONSE_BYTES, status: 200 });
      } finally {
        clearInterval(sampler);
      }
      const flood = await lastFlood();
      const rssGrowth = peakRss - base.rss;
      const heapGrowth = peakHeap - base.heapUsed;
      const figures = `server wrote ${flood.written} B in ${Date.now() - started} ms; rss +${(rssGrowth / MiB).toFixed(1)} MiB, heap +${(heapGrowth / MiB).toFixed(1)} MiB`;
      expect(flood.closedByPeer, figures).toBe(true);
      expect(flood.written, figures).toBeLessThan(CLOSED_EARLY_BYTES);
      expect(rssGrowth, figures).toBeLessThan(64 * MiB);
      expect(heapGrowth, figures).toBeLessThan(64 * MiB);
    });

    it('a Content-Length over the cap is refused at the headers, and the connection closed', async () => {
      floodWith({ contentLength: GiB });
      const err = await errorOf(egressFetch(`${hostile.url}/declared`, { maxResponseBytes: MiB }));
      expect(err).toBeInstanceOf(EgressBodyTooLargeError);
      const flood = await lastFlood();
      expect(flood.closedByPeer).toBe(true);
      expect(flood.written).toBeLessThan(CLOSED_EARLY_BYTES);
    });

    it('a gzip body is counted as it inflates (a quarter MiB on the wire, 256 MiB inflated)', async () => {
      floodWith({ gzip: true, unit: '\0'.repeat(64 * 1024), limitBytes: 256 * MiB });
      const err = await errorOf(
        egressFetch(`${hostile.url}/bomb`, { maxResponseBytes: MiB }).then((r) => r.text()),
      );
      expect(err).toBeInstanceOf(EgressBodyTooLargeError);
      expect(err).toMatchObject({ limitBytes: MiB });
    });

    it('a streamed response (server-sent events) read chunk by chunk, as the AI SDK streams: refused past the cap', async () => {
      const event = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'a'.repeat(4000) } }] })}\n\n`;
      floodWith({ headers: { 'content-type': 'text/event-stream' }, unit: event });
      const capped = cappedEgressFetch(MiB);
      const res = await capped(`${hostile.url}/v1/chat/completions`, {
        method: 'POST',
        body: '{"stream":true}',
      });
      const reader = res.body!.getReader();
      let received = 0;
      const err = await errorOf(
        (async () => {
          for (;;) {
            const next = await reader.read();
            if (next.done) return;
            received += next.value.byteLength;
          }
        })(),
      );
      expect(err).toBeInstanceOf(EgressBodyTooLargeError);
      expect(received).toBeLessThanOrEqual(MiB);
      expect(received).toBeGreaterThan(MiB / 2);
      expect((await lastFlood()).closedByPeer).toBe(true);
    });

    describe('each caller maps it to its own failure class', () => {
      it('tool call: unknown (the provider got the call; its receipt settles it), never not_sent', async () => {
        floodWith({ prefix: '{"receipt_id":"r1","result":"' });
        const out = await dispatchToolCall({
          url: `${hostile.url}/tools/x`,
          idempotencyKey: 'k-too-large',
          args: { a: 1 },
          timeoutMs: 10_000,
        });
        expect(out).toEqual({ kind: 'unknown', reason: 'response_too_large' });
        const flood = await lastFlood();
        expect(flood.closedByPeer).toBe(true);
        expect(flood.written).toBeLessThan(CLOSED_EARLY_BYTES);
      });

      it('tool call answered 4xx or 429 with a declared body over the cap: still unknown', async () => {
        for (const status of [422, 429, 503]) {
          floodWith({ status, contentLength: 2 * MiB });
          const out = await dispatchToolCall({
            url: `${hostile.url}/tools/x`,
            idempotencyKey: `k-declared-${status}`,
            args: {},
            timeoutMs: 10_000,
          });
          expect(out, String(status)).toEqual({ kind: 'unknown', reason: 'response_too_large' });
        }
      });

      it('receipt: an error (reconciled again, within the window)', async () => {
        floodWith({ prefix: '{"receipt_id":"' });
        const out = await fetchToolReceipt({
          receiptUrlTemplate: `${hostile.url}/receipts/{key}`,
          idempotencyKey: 'k-receipt',
          timeoutMs: 10_000,
        });
        expect(out).toEqual({ kind: 'error', reason: 'receipt_response_too_large' });
        expect((await lastFlood()).closedByPeer).toBe(true);
      });

      it('Telegram send: unknown (the message may have been sent), streamed or declared', async () => {
        for (const o of [
          { prefix: '{"ok":true,"result":{"message_id":1,"text":"' },
          { contentLength: 2 * MiB },
        ]) {
          floodWith(o);
          const out = await telegramSendMessage({
            apiBaseUrl: hostile.url,
            botToken: '1:TOO_LARGE',
            chatId: '1',
            threadId: null,
            text: 'hi',
            timeoutMs: 10_000,
          });
          expect(out).toEqual({ kind: 'unknown', reasonClass: 'response_too_large' });
          expect((await lastFlood()).closedByPeer).toBe(true);
        }
      });

      const wecomSend = () =>
        wecomSendText({
          apiBaseUrl: hostile.url,
          corpId: 'corp',
          corpSecret: 'secret',
          agentId: 1,
          target: { chatId: 'u1', chatType: 'direct', threadId: null, userId: 'u1' },
          text: 'hi',
          timeoutMs: 10_000,
          tokenCache: new WecomTokenCache(),
        });

      it('WeCom send: unknown (resent under the duplicate check, never failed)', async () => {
        route = (req) =>
          req.path.startsWith('/cgi-bin/gettoken')
            ? { kind: 'json', body: { errcode: 0, access_token: 'tok', expires_in: 7200 } }
            : { kind: 'flood', prefix: '{"errcode":0,"errmsg":"' };
        expect(await wecomSend()).toEqual({ kind: 'unknown', reasonClass: 'response_too_large' });
        expect((await lastFlood()).path).toMatch(/^\/cgi-bin\/message\/send/);
      });

      it('WeCom gettoken: retryable (it changes nothing), and no send is made', async () => {
        const before = hostile.requests.length;
        for (const o of [{ prefix: '{"errcode":0,"access_token":"' }, { contentLength: 2 * MiB }]) {
          floodWith(o);
          expect(await wecomSend()).toEqual({
            kind: 'retryable',
            reasonClass: 'gettoken_response_too_large',
          });
        }
        expect(hostile.requests.slice(before).map((r) => r.path.split('?')[0])).toEqual([
          '/cgi-bin/gettoken',
          '/cgi-bin/gettoken',
        ]);
      });

      it('model: a permanent ModelError response_too_large, memory bounded for a 1 GB answer', async () => {
        floodWith({
          headers: { 'content-type': 'application/json' },
          prefix:
            '{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"',
        });
        const base = process.memoryUsage().rss;
        let peak = base;
        const sampler = setInterval(() => {
          peak = Math.max(peak, process.memoryUsage().rss);
        }, 5);
        const err = await errorOf(
          callOpenAICompatible({
            baseUrl: `${hostile.url}/v1`,
            apiKey: 'sk-hostile-0123456789',
            model: 'm',
            system: 's',
            messages: [{ role: 'user', content: 'hi' }],
            tools: [],
            timeoutMs: 20_000,
          }),
        ).finally(() => clearInterval(sampler));
        expect(err).toBeInstanceOf(ModelError);
        expect(err).toMatchObject({ retryable: false, reasonClass: 'response_too_large', statusCode: 200 });
        expect((err as Error).message).not.toContain('sk-hostile');
        const flood = await lastFlood();
        expect(flood.closedByPeer).toBe(true);
        expect(flood.written).toBeLessThan(MODEL_MAX_RESPONSE_BYTES + CLOSED_EARLY_BYTES);
        // The SDK keeps the chunks up to the 8 MiB cap and copies them (a joined buffer, a string),
        // and this is the file's first model call; 96 MiB is generous for that and far below the
        // gigabyte an uncapped read would take.
        expect(peak - base).toBeLessThan(96 * MiB);
      });
    });
  });
});

/** The `address` of each error along `err`'s cause chain (a socket error names the one it tried). */
function addressesAlong(err: unknown): string[] {
  const out: string[] = [];
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const address = (e as { address?: unknown }).address;
    if (typeof address === 'string') out.push(address);
  }
  return out;
}

/** A server on 127.0.0.2 and another on 127.0.0.1, on one port (retried when the port is taken). */
async function twoServersOnOnePort(): Promise<{ checked: HostileServer; other: HostileServer }> {
  for (let attempt = 0; ; attempt++) {
    const checked = await startTrap({ host: '127.0.0.2' });
    try {
      const other = await startTrap({ host: '127.0.0.1', port: checked.port });
      return { checked, other };
    } catch (err) {
      await checked.close();
      if (attempt >= 5) throw err;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Through the real callers, as a user sees it: a message in through the webhook, the worker's
// model and tool activities, the outcome recorded on the message.
// ---------------------------------------------------------------------------------------------

const KEY = 'sk-egress-ssrf-0123456789abcdef';

describe('egress limits, end to end through the worker', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let openai: FakeOpenAI;
  let trap: HostileServer;

  beforeAll(async () => {
    h = await createHarness();
    [telegram, openai, trap] = await Promise.all([
      startFakeTelegram(),
      startFakeOpenAI({ apiKey: KEY }),
      startTrap(),
    ]);
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([telegram?.close(), openai?.close(), trap?.close()]);
  });

  async function openAITenant(baseUrl: string) {
    const t = await setupTenant(h.app, { telegram });
    const profile = await createOpenAIProfile(h.app, t, { baseUrl, apiKey: KEY });
    await publishRevision(h.app, { ...t, modelProfileId: profile.model_profile_id }, {});
    return t;
  }

  /** What the user saw and what the run recorded, for a message whose model call failed for good. */
  async function expectPermanentModelFailure(
    t: Awaited<ReturnType<typeof openAITenant>>,
    chatId: number,
    text: string,
    reasonClass: string,
  ) {
    const msg = await waitForMessage(h.sql, t.tenantId, text, finished, 45_000);
    expect(msg).toMatchObject({ status: 'failed', outcome: 'model_failed' });
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual([MODEL_FAILED_REPLY]);
    // Permanent: one attempt, not the retry policy's five.
    expect(await activitiesOf(h, msg.workflow_id)).toMatchObject({
      modelTurn: { scheduled: 1, lastAttempt: 1, failureType: 'ModelPermanent' },
    });
    const turns = (await auditOfTenant(h.sql, t.tenantId)).filter((a) => a.action === 'model.turn');
    expect(turns).toEqual([expect.objectContaining({ decision: 'failed', error_type: reasonClass })]);
  }

  it('a model answer over the cap: the fixed reply, outcome model_failed, one attempt, audited as response_too_large', async () => {
    const t = await openAITenant(openai.baseURL);
    // The fake answers a well-formed completion of 9 MiB (Content-Length over the 8 MiB cap).
    openai.setResponder(() => 'x'.repeat(MODEL_MAX_RESPONSE_BYTES + MiB));
    try {
      const chatId = 63_001;
      await sendText(h, routeOf(t), chatId, 'say a lot');
      await expectPermanentModelFailure(t, chatId, 'say a lot', 'response_too_large');
      expect(openai.requests.filter((r) => r.endpoint === 'chat.completions')).toHaveLength(1);
    } finally {
      openai.setResponder(undefined);
    }
  }, 60_000);

  it('a model base_url answering 307 to a local server: not followed, the target gets nothing, outcome model_failed', async () => {
    const redirector = await startRedirector(307, (path) => `${trap.url}${path}`);
    try {
      const t = await openAITenant(`${redirector.url}/v1`);
      const chatId = 63_002;
      await sendText(h, routeOf(t), chatId, 'follow me');
      await expectPermanentModelFailure(t, chatId, 'follow me', 'redirect_refused');
      expect(redirector.requests.map((r) => r.path)).toEqual(['/v1/chat/completions']);
      expect(trap.requests).toEqual([]);
    } finally {
      await redirector.close();
    }
  }, 60_000);

  it('a tool that applies the call and answers without end: unknown, reconciled by its receipt, applied once, the turn completes', async () => {
    const applied = new Map<string, unknown>();
    const provider = await startHostile((req) => {
      const key = String(req.headers['idempotency-key'] ?? '');
      if (req.method === 'POST' && req.path === '/tools/order') {
        applied.set(key, JSON.parse(req.body));
        return { kind: 'flood', prefix: '{"receipt_id":"r","result":"' };
      }
      const receipt = /^\/receipts\/(.+)$/.exec(req.path);
      const k = receipt ? decodeURIComponent(receipt[1]!) : '';
      return applied.has(k)
        ? { kind: 'json', body: { receipt_id: `rcpt_${applied.size}`, key: k, result: applied.get(k) } }
        : { kind: 'json', status: 404, body: { error: 'no such key' } };
    });
    try {
      const t = await seedTelegramTenant(h.sql, h.secrets, {
        apiBaseUrl: telegram.url,
        ...orderToolAgent(provider.url),
      });
      telegram.addBot(t.botToken);
      const chatId = 63_003;
      await sendText(h, t, chatId, 'order widget');

      const [msg] = await waitForFinished(h, t.tenantId, 1, 45_000);
      expect(msg).toMatchObject({ status: 'replied', failure_reason: null });
      expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['ordered widget']);
      const [invocation, ...more] = await invocationsOfTenant(h.sql, t.tenantId);
      expect(more).toEqual([]);
      expect(invocation).toMatchObject({ status: 'accepted', last_error: 'response_too_large' });
      // One POST (never resent: the answer was lost, not the call), settled by one receipt read.
      expect(provider.requests.map((r) => `${r.method} ${r.path.split('/')[1]}`)).toEqual([
        'POST tools',
        'GET receipts',
      ]);
      expect([...applied.values()]).toEqual([{ item: 'widget' }]);
      const decided = (await auditOfTenant(h.sql, t.tenantId)).filter(
        (a) => a.action === 'tool.invocation' && a.decision === 'accepted',
      );
      expect(decided).toEqual([
        expect.objectContaining({
          details: expect.objectContaining({ reconciled: true, after: 'response_too_large' }),
        }),
      ]);
      const [flood] = provider.floods;
      await flood!.over;
      expect(flood).toMatchObject({ closedByPeer: true });
      expect(flood!.written).toBeLessThan(CLOSED_EARLY_BYTES);
    } finally {
      await provider.close();
    }
  }, 60_000);

  it('a Bot API base that answers a send without end: the segment is parked as an unknown outcome, not failed', async () => {
    const bot = await startHostile(() => ({
      kind: 'flood',
      prefix: '{"ok":true,"result":{"message_id":7,"text":"',
    }));
    try {
      const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: bot.url });
      const chatId = 63_004;
      await sendText(h, t, chatId, 'hello, flood');

      const [msg] = await waitForFinished(h, t.tenantId, 1, 45_000);
      expect(msg).toMatchObject({ status: 'failed', failure_reason: 'unknown_outcome' });
      const segments = await segmentsOf(h, t.tenantId);
      expect(segments.map((s) => [s.status, s.last_error])).toEqual([['unknown', 'response_too_large']]);
      expect(await deadLettersOf(h, t.tenantId)).toEqual([
        expect.objectContaining({
          kind: 'segment',
          reason_class: 'unknown_outcome',
          detail: expect.objectContaining({ cause: 'response_too_large' }),
        }),
      ]);
      // Sent once (Telegram has no idempotency key): never resent blindly.
      expect(bot.requests.filter((r) => r.path.endsWith('/sendMessage'))).toHaveLength(1);
    } finally {
      await bot.close();
    }
  }, 60_000);
});
