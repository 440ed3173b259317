import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newApp } from '../../api/app';
import type { AppDeps } from '../../api/deps';
import {
  ADMIN_FAILURE_LIMIT,
  WEBHOOK_FAILURE_LIMIT,
  WEBHOOK_SOURCE_FAILURE_LIMIT,
} from '../../api/failure-limit';
import { routeKeyDigest } from '../../api/ingress/candidate';
import { limiterAddress, sourceAddressOf } from '../../api/request-meta';
import {
  SECURITY_EVENT_RETENTION_S,
  SECURITY_EVENT_SAMPLE_ONE_IN,
  SECURITY_EVENTS_KEPT_PER_MINUTE,
} from '../../api/webhooks/security-sink';
import { pruneSecurityEvents } from '../../db/queries/ingress';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Cheap rejection (security issue #13): malformed admin bearers and rate-limited sources are
// refused before the database; the tenant-less security sink is sampled under a flood and pruned;
// request ids are always the server's own. Real PostgreSQL and Temporal, in-process requests; a
// source address is given the way @hono/node-server gives it (c.env.incoming.socket).
describe('cheap rejection', () => {
  let h: Harness;
  let x: SeededTelegram;
  let y: SeededTelegram;
  const clients: postgres.Sql[] = [];

  beforeAll(async () => {
    h = await createHarness();
    x = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: 'http://127.0.0.1:9' });
    y = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: 'http://127.0.0.1:9' });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end()));
    await h?.close();
  });

  /** The bindings @hono/node-server hands the app for a connection from `address`. */
  const from = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });
  const wellShapedKey = () => `sy_${randomBytes(32).toString('base64url')}`;

  /** A private app whose PostgreSQL client counts every statement it sends (postgres.js `debug`). */
  function countingApp(overrides: Partial<AppDeps> = {}, opts: Parameters<typeof newApp>[1] = {}) {
    const sent: string[] = [];
    const sql = postgres(inject('databaseUrl'), {
      max: 2,
      onnotice: () => undefined,
      debug: (_connection, query) => {
        sent.push(query);
      },
    });
    clients.push(sql);
    const app = newApp({ ...h.appDeps, sql, ...overrides }, opts);
    return { app, statements: () => sent.length, sent };
  }

  const admin = (
    app: ReturnType<typeof newApp>,
    authorization: string | null,
    env?: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.request(
      '/v1/admin/tenants?limit=1',
      { headers: { ...(authorization === null ? {} : { authorization }), ...headers } },
      env,
    );

  const telegram = (
    app: ReturnType<typeof newApp>,
    t: { routeKey: string },
    secret: string,
    env?: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.request(
      `/v1/webhooks/telegram/${t.routeKey}`,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-telegram-bot-api-secret-token': secret,
          ...headers,
        },
        // Verified, but not a message: acknowledged with 200 and nothing recorded.
        body: JSON.stringify({ update_id: 1 }),
      },
      env,
    );

  const errorOf = async (res: Response) =>
    ((await res.json()) as { error: { code: string; message: string; request_id: string } }).error;

  it('a malformed bearer gets the same 401 as an unknown key, without a single database statement', async () => {
    const { app, statements } = countingApp();
    const malformed: (string | null)[] = [
      null,
      'Basic dXNlcjpwYXNz',
      'Bearer',
      'Bearer short',
      `Bearer ${TEST_ADMIN_TOKEN}x`,
      `Bearer ${TEST_ADMIN_TOKEN.slice(0, -1)}`,
      `Bearer sy_${randomBytes(32).toString('base64url').slice(0, 42)}`, // one character short
      `Bearer ${wellShapedKey()}A`, // one too long
      `Bearer sy_${randomBytes(32).toString('base64url').slice(0, 42)}B`, // a last character 32 bytes never end in
      `Bearer SY_${randomBytes(32).toString('base64url')}`,
      `Bearer sy_${'+'.repeat(43)}`,
      `Bearer ${'x'.repeat(600)}`,
    ];
    for (const authorization of malformed) {
      const res = await admin(app, authorization);
      expect(res.status, String(authorization).slice(0, 30)).toBe(401);
      expect(await errorOf(res)).toMatchObject({
        code: 'unauthenticated',
        message: 'A valid bearer token is required.',
      });
    }
    expect(statements()).toBe(0);

    // The control: a well-shaped key is looked up (and is unknown), so the counter does count.
    const unknown = await admin(app, `Bearer ${wellShapedKey()}`);
    expect(unknown.status).toBe(401);
    expect(await errorOf(unknown)).toMatchObject({
      code: 'unauthenticated',
      message: 'A valid bearer token is required.',
    });
    expect(statements()).toBeGreaterThan(0);
  });

  it('admin: after the limit of failures one address gets 429 with Retry-After, at no database cost; other addresses and successes are unaffected', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const { app, statements } = countingApp({ now: () => now });
    const bad = () => `Bearer ${wellShapedKey()}`;
    const platform = `Bearer ${TEST_ADMIN_TOKEN}`;
    const a = from('203.0.113.10');

    for (let i = 0; i < ADMIN_FAILURE_LIMIT.failures; i++)
      expect((await admin(app, bad(), a)).status).toBe(401);
    const before = statements();
    const limited = await admin(app, bad(), a);
    expect(limited.status).toBe(429);
    const perToken = ADMIN_FAILURE_LIMIT.windowMs / ADMIN_FAILURE_LIMIT.failures;
    expect(limited.headers.get('retry-after')).toBe(String(Math.ceil(perToken / 1000)));
    const envelope = await errorOf(limited);
    expect(envelope.code).toBe('rate_limited');
    expect(envelope.request_id).toBe(limited.headers.get('x-request-id'));
    // Limited per address: while it is blocked, the address is refused before any credential is
    // looked at — the platform token included (else the block would not stop guessing it).
    expect((await admin(app, platform, a)).status).toBe(429);
    expect((await admin(app, 'Bearer malformed', a)).status).toBe(429);
    // A client cannot talk its way out with X-Forwarded-For (not trusted by default).
    expect((await admin(app, bad(), a, { 'x-forwarded-for': '192.0.2.44' })).status).toBe(429);
    expect(statements()).toBe(before);

    // Another address is unaffected, for valid and invalid tokens alike.
    const b = from('198.51.100.7');
    expect((await admin(app, platform, b)).status).toBe(200);
    expect((await admin(app, bad(), b)).status).toBe(401);

    // Successes never draw on the budget: many of them, then the full budget of failures.
    const c = from('198.51.100.8');
    for (let i = 0; i < 3 * ADMIN_FAILURE_LIMIT.failures; i++)
      expect((await admin(app, platform, c)).status).toBe(200);
    for (let i = 0; i < ADMIN_FAILURE_LIMIT.failures; i++)
      expect((await admin(app, bad(), c)).status).toBe(401);
    expect((await admin(app, platform, c)).status).toBe(429);

    // The budget refills: after Retry-After one more failure is answered (401), then 429 again.
    now += perToken;
    expect((await admin(app, bad(), a)).status).toBe(401);
    expect((await admin(app, bad(), a)).status).toBe(429);
    now += ADMIN_FAILURE_LIMIT.windowMs;
    expect((await admin(app, platform, a)).status).toBe(200);

    // IPv6: one /64 is one source; the next /64 is another.
    const v6 = (addr: string) => from(addr);
    for (let i = 0; i < ADMIN_FAILURE_LIMIT.failures; i++)
      expect((await admin(app, bad(), v6(`2001:db8:1:2::${i + 1}`))).status).toBe(401);
    expect((await admin(app, platform, v6('2001:db8:1:2:ffff::9'))).status).toBe(429);
    expect((await admin(app, platform, v6('2001:db8:1:3::1'))).status).toBe(200);
  });

  it('with trusted proxy hops, the address is the entry our proxy wrote, not one the client chose', async () => {
    const { app } = countingApp({}, { trustedProxyHops: 1 });
    const proxy = from('10.0.0.1');
    const bad = () => `Bearer ${wellShapedKey()}`;
    const xff = (v: string) => ({ 'x-forwarded-for': v });
    for (let i = 0; i < ADMIN_FAILURE_LIMIT.failures; i++)
      expect((await admin(app, bad(), proxy, xff('192.0.2.1'))).status).toBe(401);
    expect((await admin(app, bad(), proxy, xff('192.0.2.1'))).status).toBe(429);
    // Prepending a made-up address does not help: the proxy appended the real one on the right.
    expect((await admin(app, bad(), proxy, xff('192.0.2.200, 192.0.2.1'))).status).toBe(429);
    // Another client behind the same proxy is another source.
    expect((await admin(app, `Bearer ${TEST_ADMIN_TOKEN}`, proxy, xff('192.0.2.2'))).status).toBe(200);

    expect(sourceAddressOf(from('10.0.0.1'), '1.1.1.1, 192.0.2.9', 1)).toBe('192.0.2.9');
    expect(sourceAddressOf(from('10.0.0.1'), '1.1.1.1, 192.0.2.9', 0)).toBe('10.0.0.1');
    expect(sourceAddressOf(from('10.0.0.1'), 'not-an-ip', 1)).toBe('10.0.0.1');
    expect(sourceAddressOf({ incoming: { socket: {} } }, undefined, 0)).toBe('unknown');
    expect(sourceAddressOf(undefined, '192.0.2.9', 1)).toBeNull();
    expect(limiterAddress('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(limiterAddress('2001:0db8:0000:0042:0000:8a2e:0370:7334')).toBe('2001:db8:0:42::/64');
    expect(limiterAddress('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(limiterAddress('1::2:3:4:5:192.0.2.1')).toBe('1:0:2:3::/64');
  });

  it('webhooks: a source failing on one route is limited on that route only; other routes and other sources go through', async () => {
    const { app, statements } = countingApp();
    const a = from('203.0.113.20');
    const wrong = randomBytes(16).toString('hex');
    for (let i = 0; i < WEBHOOK_FAILURE_LIMIT.failures; i++)
      expect((await telegram(app, x, wrong, a)).status).toBe(401);
    const before = statements();
    const limited = await telegram(app, x, wrong, a);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await errorOf(limited)).code).toBe('rate_limited');
    // The blocked source on the blocked route: refused before the lookup, even with the secret.
    expect((await telegram(app, x, x.webhookSecret, a)).status).toBe(429);
    expect(statements()).toBe(before);
    // Same source, another tenant's route: its legitimate webhook goes through.
    expect((await telegram(app, y, y.webhookSecret, a)).status).toBe(200);
    // Another source on the blocked route (the provider itself): goes through.
    expect((await telegram(app, x, x.webhookSecret, from('149.154.167.220'))).status).toBe(200);

    // An unknown route is limited exactly like a known one: the 429 tells nothing about routes.
    const nowhere = { routeKey: randomBytes(16).toString('base64url') };
    for (let i = 0; i < WEBHOOK_FAILURE_LIMIT.failures; i++)
      expect((await telegram(app, nowhere, wrong, a)).status).toBe(401);
    expect((await telegram(app, nowhere, wrong, a)).status).toBe(429);
  });

  it('webhooks: a source spraying fresh route keys runs out of its source-wide budget', async () => {
    // A frozen clock: the budget does not refill while the spray runs.
    const frozen = Date.now();
    const { app } = countingApp({ now: () => frozen });
    const a = from('203.0.113.21');
    const wrong = randomBytes(16).toString('hex');
    // Each route key is new, so no per-route budget is ever used up; the source-wide one is.
    for (let i = 0; i < WEBHOOK_SOURCE_FAILURE_LIMIT.failures; i++) {
      const fresh = { routeKey: randomBytes(16).toString('base64url') };
      expect((await telegram(app, fresh, wrong, a)).status).toBe(401);
    }
    const next = { routeKey: randomBytes(16).toString('base64url') };
    expect((await telegram(app, next, wrong, a)).status).toBe(429);
    // Another source still goes through.
    expect((await telegram(app, x, x.webhookSecret, from('149.154.167.221'))).status).toBe(200);
  });

  it('a secret header no binding can have is refused before the route lookup', async () => {
    const { app, sent } = countingApp();
    for (const secret of ['has space', 'ünïcode', 'x'.repeat(257), 'semi;colon']) {
      const res = await telegram(app, x, secret);
      expect(res.status).toBe(401);
      expect(await errorOf(res)).toMatchObject({
        code: 'unauthenticated',
        message: 'Request could not be verified.',
      });
    }
    // Only the security sink wrote (one insert each); no binding was looked up.
    expect(sent.filter((q) => q.includes('insert into ingress_security_event'))).toHaveLength(4);
    expect(sent.filter((q) => q.includes('find_binding_candidate'))).toHaveLength(0);
    // The control: a well-shaped wrong secret is looked up.
    expect((await telegram(app, x, randomBytes(16).toString('hex'))).status).toBe(401);
    expect(sent.filter((q) => q.includes('find_binding_candidate'))).toHaveLength(1);
  });

  it('pruning deletes only rows past the retention, at most `limit` per call', async () => {
    const marker = routeKeyDigest(randomBytes(16).toString('base64url'));
    const insert = (ageSeconds: number) => h.sql`
      insert into ingress_security_event (request_id, channel, route_key_digest, failure_class, occurred_at)
      values (${`req_test_${randomBytes(6).toString('hex')}`}, 'telegram', ${marker}, 'test_prune',
              now() - make_interval(secs => ${ageSeconds}))`;
    for (let i = 0; i < 5; i++) await insert(SECURITY_EVENT_RETENTION_S + 3600);
    await insert(SECURITY_EVENT_RETENTION_S - 3600);
    const left = async () =>
      (
        await h.sql<{ old: number; young: number }[]>`
        select count(*) filter (where occurred_at < now() - make_interval(secs => ${SECURITY_EVENT_RETENTION_S}))::int as old,
               count(*) filter (where occurred_at >= now() - make_interval(secs => ${SECURITY_EVENT_RETENTION_S}))::int as young
        from ingress_security_event where route_key_digest = ${marker}`
      )[0]!;

    for (let calls = 0; (await left()).old > 0; calls++) {
      expect(calls).toBeLessThan(20);
      const deleted = await pruneSecurityEvents(h.sql, {
        retentionSeconds: SECURITY_EVENT_RETENTION_S,
        limit: 2,
      });
      expect(deleted).toBeLessThanOrEqual(2);
    }
    expect(await left()).toEqual({ old: 0, young: 1 });
  });

  it('1,000 wrong secrets leave the sampled number of rows, count what they dropped, and the sink prunes old rows', async () => {
    const lines: { msg: string; failureClass?: string; dropped?: number }[] = [];
    const log = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    // Rows past the retention, to be pruned by the sink itself (its first recorded row prunes).
    const stale = routeKeyDigest(randomBytes(16).toString('base64url'));
    await h.sql`
      insert into ingress_security_event (request_id, channel, route_key_digest, failure_class, occurred_at)
      select 'req_stale_' || g, 'telegram', ${stale}, 'test_prune', now() - interval '8 days'
      from generate_series(1, 3) g`;

    // A frozen clock keeps the run in one sampling window; in-process requests have no source
    // address, so the failure limiter stays out of the way and every request reaches the sink.
    const now = Date.now();
    const app = newApp({ ...h.appDeps, log, now: () => now });
    const digest = routeKeyDigest(x.routeKey);
    const count = async () =>
      (
        await h.sql<{ n: number }[]>`
        select count(*)::int as n from ingress_security_event
        where route_key_digest = ${digest} and failure_class = 'bad_secret_token'`
      )[0]!.n;
    const before = await count();
    const sent = 1000;
    const wrong = randomBytes(16).toString('hex');
    for (let i = 0; i < sent; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, () => telegram(app, x, wrong)));
      for (const res of batch) expect(res.status).toBe(401);
    }

    const kept =
      SECURITY_EVENTS_KEPT_PER_MINUTE +
      Math.floor((sent - SECURITY_EVENTS_KEPT_PER_MINUTE) / SECURITY_EVENT_SAMPLE_ONE_IN);
    expect(await count()).toBe(before + kept);
    expect(kept).toBeLessThan(sent / 5);
    // Every dropped event is counted in the log line of the next kept one of its class.
    const dropped = lines
      .filter((l) => l.failureClass === 'bad_secret_token' && typeof l.dropped === 'number')
      .reduce((sum, l) => sum + (l.dropped ?? 0), 0);
    expect(dropped).toBe(sent - kept);

    await waitFor(
      async () => {
        const [r] = await h.sql<{ n: number }[]>`
          select count(*)::int as n from ingress_security_event where route_key_digest = ${stale}`;
        return r!.n === 0;
      },
      { label: 'stale security events pruned' },
    );
  });

  it("request ids are the server's: a client's x-request-id is only a correlation field in audit details", async () => {
    const chosen = `client-${randomBytes(6).toString('hex')}`;
    const res = await h.app.request('/v1/admin/tenants', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        'content-type': 'application/json',
        'x-request-id': chosen,
      },
      body: JSON.stringify({
        tenant_key: `rid-${randomBytes(4).toString('hex')}`,
        display_name: 'Request ids',
      }),
    });
    expect(res.status).toBe(201);
    const ours = res.headers.get('x-request-id');
    expect(ours).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
    const tenantId = ((await res.json()) as { tenant_id: string }).tenant_id;

    const rows = await h.sql<{ request_id: string; details: Record<string, unknown> }[]>`
      select request_id, details from audit_log where tenant_id = ${tenantId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.request_id).toBe(ours);
    expect(rows[0]!.details.client_request_id).toBe(chosen);
    expect(await h.sql`select 1 from audit_log where request_id = ${chosen}`).toHaveLength(0);

    // A client cannot pick an id that looks like ours either, and an ill-formed one is dropped.
    const lookalike = 'req_01ARZ3NDEKTSV4RRFFQ69G5FAV';
    const again = await h.app.request(`/v1/admin/tenants/${tenantId}/status-transitions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        'content-type': 'application/json',
        'x-request-id': lookalike,
      },
      body: JSON.stringify({ expected_version: 1, next_status: 'suspended', reason: 'request ids' }),
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-request-id')).not.toBe(lookalike);
    const tooLong = await h.app.request(`/v1/admin/tenants/${tenantId}/status-transitions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        'content-type': 'application/json',
        'x-request-id': 'y'.repeat(129),
      },
      body: JSON.stringify({ expected_version: 2, next_status: 'active', reason: 'request ids' }),
    });
    expect(tooLong.status).toBe(200);
    const audited = await h.sql<{ action: string; request_id: string; details: Record<string, unknown> }[]>`
      select action, request_id, details from audit_log where tenant_id = ${tenantId} order by seq`;
    expect(audited.map((r) => r.request_id)).toEqual([
      ours,
      again.headers.get('x-request-id'),
      tooLong.headers.get('x-request-id'),
    ]);
    expect(audited.map((r) => r.details.client_request_id)).toEqual([chosen, lookalike, undefined]);
    expect(await h.sql`select 1 from audit_log where request_id = ${lookalike}`).toHaveLength(0);

    // The security sink and the error envelope carry the server's id too.
    const rejected = await telegram(h.app, x, 'wrong', undefined, { 'x-request-id': chosen });
    expect(rejected.status).toBe(401);
    const rid = rejected.headers.get('x-request-id')!;
    expect(rid).toMatch(/^req_/);
    expect((await errorOf(rejected)).request_id).toBe(rid);
    expect(await h.sql`select 1 from ingress_security_event where request_id = ${rid}`).toHaveLength(1);
    expect(await h.sql`select 1 from ingress_security_event where request_id = ${chosen}`).toHaveLength(0);
  });
});
