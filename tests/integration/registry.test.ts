import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newApp } from '../../api/app';
import { routeKeyDigest } from '../../api/ingress/candidate';
import { createSql, type Sql } from '../../db/client';
import { type RunningRegistry, startRegistry } from '../../registry';
import { type ConfigRegistry, createConfigRegistry } from '../../registry/cache';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { api, configurationOf } from '../helpers/admin';
import { SUITE_AUDIT_KEY, testLoginUrl } from '../helpers/db-logins';
import { createHarness, type Harness } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// The configuration registry across "two API processes": two apps in this test process, each with
// its own PostgreSQL pool (the API login), its own registry and its own LISTEN session, as two
// `npm run api` processes have. A change made through one must reach the other within 1 s.

const TTL_MS = 30_000;
/** The promise of issue #14: a change takes effect on every instance within this. */
const WITHIN_MS = 1_000;

interface ApiProcess {
  app: ReturnType<typeof newApp>;
  sql: Sql;
  running: RunningRegistry;
  registry: ConfigRegistry;
}

describe('configuration registry: version events reach every API process', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let a: ApiProcess;
  let b: ApiProcess;
  const extra: { end(): Promise<unknown> }[] = [];

  const startProcess = async (): Promise<ApiProcess> => {
    const sql = createSql(testLoginUrl(inject('databaseUrl'), 'api'), { max: 4, auditKey: SUITE_AUDIT_KEY });
    const running = await startRegistry({ sql, ttlMs: TTL_MS, log: h.appDeps.log, probeMs: 500 });
    const app = newApp({ ...h.appDeps, sql, registry: running.registry });
    return { app, sql, running, registry: running.registry };
  };

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    await h.startWorker();
    a = await startProcess();
    b = await startProcess();
  });
  afterAll(async () => {
    for (const p of [a, b]) {
      await p?.running.close();
      await p?.sql.end();
    }
    for (const c of extra) await c.end();
    await h?.close();
    await telegram?.close();
  });

  const post = (
    p: { app: ApiProcess['app'] },
    t: SeededTelegram,
    chatId: number,
    text: string,
    secret?: string,
  ) =>
    p.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-telegram-bot-api-secret-token': secret ?? t.webhookSecret,
      },
      body: JSON.stringify(telegramTextUpdate({ chatId, text })),
    });

  const seed = async (scripted?: unknown) => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url, scripted });
    telegram.addBot(t.botToken);
    return t;
  };
  const digestOf = (t: SeededTelegram) => routeKeyDigest(t.routeKey);
  const tenantVersion = async (tenantId: string) =>
    (await h.sql<{ version: number }[]>`select version from tenant where tenant_id = ${tenantId}`)[0]!
      .version;

  /** Polls `check` until true; returns how long it took (fails past `withinMs`). */
  const within = async (withinMs: number, label: string, check: () => Promise<boolean>) => {
    const started = performance.now();
    await waitFor(check, { timeoutMs: withinMs, label });
    return performance.now() - started;
  };

  const warm = async (t: SeededTelegram) => {
    for (const p of [a, b])
      expect((await p.registry.candidate('telegram', digestOf(t)))?.tenant_id).toBe(t.tenantId);
  };

  it('suspending a tenant through one process: the other stops executing its messages within 1 s', async () => {
    const t = await seed();
    const chat = 910_001;
    await warm(t);
    expect((await post(b, t, chat, 'before')).status).toBe(200);
    await waitFor(() => telegram.sentTo(chat).length === 1, { label: 'executed reply' });
    expect(telegram.sentTo(chat)[0]!.text).toBe('You said: before');

    const res = await api(a.app, 'POST', `/v1/admin/tenants/${t.tenantId}/status-transitions`, {
      body: {
        expected_version: await tenantVersion(t.tenantId),
        next_status: 'suspended',
        reason: 'registry test',
      },
    });
    expect(res.status).toBe(200);
    // Process A dropped its entry when the mutation answered (read-your-writes), B on the event.
    expect((await a.registry.candidate('telegram', digestOf(t)))?.tenant_status).toBe('suspended');
    await within(WITHIN_MS, 'B sees the suspension', async () => {
      return (await b.registry.candidate('telegram', digestOf(t)))?.tenant_status === 'suspended';
    });
    // B's next message is recorded but never executed: the fixed fallback, no agent run.
    expect((await post(b, t, chat, 'after')).status).toBe(200);
    await waitFor(() => telegram.sentTo(chat).length === 2, { label: 'fallback reply' });
    expect(telegram.sentTo(chat)[1]!.text).toBe('This service is temporarily unavailable.');
    const [row] = await h.sql<{ outcome: string; execution_plan: unknown }[]>`
      select outcome, execution_plan from message_event
      where tenant_id = ${t.tenantId} and payload->>'text' = 'after'`;
    expect(row).toMatchObject({ outcome: 'tenant_suspended', execution_plan: null });

    // Disabling: not routed at all, on both, within 1 s.
    const disabled = await api(a.app, 'POST', `/v1/admin/tenants/${t.tenantId}/status-transitions`, {
      body: {
        expected_version: await tenantVersion(t.tenantId),
        next_status: 'disabled',
        reason: 'registry test',
      },
    });
    expect(disabled.status).toBe(200);
    expect((await post(a, t, chat, 'disabled a')).status).toBe(401);
    await within(WITHIN_MS, 'B refuses the disabled tenant', async () => {
      return (await b.registry.candidate('telegram', digestOf(t)))?.tenant_status === 'disabled';
    });
    expect((await post(b, t, chat, 'disabled b')).status).toBe(401);
    // The outbox rows were the events: each applied once per process.
    for (const p of [a, b]) expect(p.registry.stats().events.duplicate).toBe(0);
  });

  it('rotating the Telegram secret: the old webhook_secret_token fails on both at once', async () => {
    const t = await seed();
    const chat = 910_002;
    for (const p of [a, b]) expect((await post(p, t, chat, 'old token')).status).toBe(200);
    const [secret] = await h.sql<{ name: string }[]>`
      select s.name from secret s join channel_binding cb on cb.tenant_id = s.tenant_id and cb.secret_ref = s.secret_ref
      where cb.tenant_id = ${t.tenantId} and cb.binding_id = ${t.bindingId}`;
    const newToken = randomBytes(16).toString('hex');
    const res = await api(a.app, 'PUT', `/v1/admin/tenants/${t.tenantId}/secrets/${secret!.name}`, {
      body: { value: { bot_token: t.botToken, webhook_secret_token: newToken } },
    });
    expect(res.status).toBe(200);
    expect((await post(a, t, chat, 'old on a')).status).toBe(401);
    expect((await post(a, t, chat, 'new on a', newToken)).status).toBe(200);
    await within(
      WITHIN_MS,
      'B refuses the old token',
      async () => (await post(b, t, chat, 'old on b')).status === 401,
    );
    expect((await post(b, t, chat, 'new on b', newToken)).status).toBe(200);
  });

  it('publishing a revision through one process: the next message on both uses it', async () => {
    const t = await seed();
    const [mp] = await h.sql<{ model_profile_id: string }[]>`
      select model_profile_id from model_profile where tenant_id = ${t.tenantId}`;
    const created = await api(a.app, 'POST', `/v1/admin/tenants/${t.tenantId}/apps/${t.appId}/revisions`, {
      body: {
        model_profile_id: mp!.model_profile_id,
        system_prompt: 'v2',
        scripted: { rules: [], default_reply: 'v2: {{text}}' },
      },
    });
    expect(created.status).toBe(201);
    for (const [p, chat] of [
      [a, 910_003],
      [b, 910_004],
    ] as const) {
      expect((await post(p, t, chat, 'one')).status).toBe(200);
    }
    await waitFor(() => telegram.sentTo(910_003).length === 1 && telegram.sentTo(910_004).length === 1, {
      label: 'revision 1 replies',
    });
    const [app] = await h.sql<{ version: number }[]>`
      select version from agent_app where tenant_id = ${t.tenantId} and app_id = ${t.appId}`;
    const published = await api(a.app, 'POST', `/v1/admin/tenants/${t.tenantId}/apps/${t.appId}/publish`, {
      body: { revision: created.body.revision, expected_version: app!.version },
    });
    expect(published.status).toBe(200);
    for (const [p, chat] of [
      [a, 910_003],
      [b, 910_004],
    ] as const) {
      expect((await post(p, t, chat, 'two')).status).toBe(200);
    }
    await waitFor(() => telegram.sentTo(910_003).length === 2 && telegram.sentTo(910_004).length === 2, {
      label: 'revision 2 replies',
    });
    expect(telegram.sentTo(910_003).map((s) => s.text)).toEqual(['You said: one', 'v2: two']);
    expect(telegram.sentTo(910_004).map((s) => s.text)).toEqual(['You said: one', 'v2: two']);
  });

  it('the process that made an admin change drops the tenant at once, without waiting for the event', async () => {
    const t = await seed();
    // No LISTEN session here: only the admin route's own invalidation can drop the entry.
    const registry = createConfigRegistry({ sql: h.apiSql, ttlMs: TTL_MS });
    const app = newApp({ ...h.appDeps, registry });
    expect((await registry.candidate('telegram', digestOf(t)))?.tenant_status).toBe('active');
    const res = await api(app, 'POST', `/v1/admin/tenants/${t.tenantId}/status-transitions`, {
      body: {
        expected_version: await tenantVersion(t.tenantId),
        next_status: 'disabled',
        reason: 'registry test',
      },
    });
    expect(res.status).toBe(200);
    expect(registry.stats().events.applied).toBe(0);
    expect((await post({ app }, t, 910_008, 'after')).status).toBe(401);
  });

  it('a mutation that changes no configuration (an API key, a message action) keeps the tenant cached', async () => {
    const t = await seed();
    const registry = createConfigRegistry({ sql: h.apiSql, ttlMs: TTL_MS });
    const app = newApp({ ...h.appDeps, registry });
    expect((await registry.candidate('telegram', digestOf(t)))?.tenant_status).toBe('active');
    const minted = await api(app, 'POST', `/v1/admin/tenants/${t.tenantId}/api-keys`, {
      body: { role: 'tenant_viewer' },
    });
    expect(minted.status).toBe(201);
    const misses = registry.stats().misses;
    await registry.candidate('telegram', digestOf(t));
    expect(registry.stats().misses).toBe(misses);
    // A change of what it caches still drops it at once.
    const tenant = (await api(app, 'GET', `/v1/admin/tenants/${t.tenantId}`)).body;
    const res = await api(app, 'PUT', `/v1/admin/tenants/${t.tenantId}/configuration`, {
      body: configurationOf(tenant, { rate_limit_rpm: 1000 }),
    });
    expect(res.status, res.text).toBe(200);
    expect((await registry.candidate('telegram', digestOf(t)))?.tenant_rate_limit_rpm).toBe(1000);
    expect(registry.stats().misses).toBe(misses + 1);
  });

  it('a deactivated binding is refused on both within 1 s', async () => {
    const t = await seed();
    await warm(t);
    const [binding] = await h.sql<{ version: number }[]>`
      select version from channel_binding where tenant_id = ${t.tenantId} and binding_id = ${t.bindingId}`;
    const res = await api(
      a.app,
      'POST',
      `/v1/admin/tenants/${t.tenantId}/bindings/${t.bindingId}/status-transitions`,
      {
        body: { expected_version: binding!.version, next_status: 'suspended' },
      },
    );
    expect(res.status).toBe(200);
    expect((await post(a, t, 910_005, 'a')).status).toBe(401);
    await within(
      WITHIN_MS,
      'B refuses the binding',
      async () => (await post(b, t, 910_005, 'b')).status === 401,
    );
  });

  it('the LISTEN session killed (pg_terminate_backend): B listens again, flushes, and still invalidates', async () => {
    const t = await seed();
    await warm(t);
    const pid = b.running.listener.backendPid();
    expect(pid).not.toBeNull();
    const flushes = b.registry.stats().flushes;
    await h.sql`select pg_terminate_backend(${pid})`;
    // Changed while nobody listens on B: the event is lost to B, the reconnect's flush covers it.
    await h.sql`update tenant set rate_limit_rpm = 0 where tenant_id = ${t.tenantId}`;
    await waitFor(() => b.running.listener.connected() && b.running.listener.backendPid() !== pid, {
      label: 'B listening on a new session',
      timeoutMs: 5_000,
    });
    expect(b.registry.stats().flushes).toBeGreaterThan(flushes);
    expect((await b.registry.candidate('telegram', digestOf(t)))?.tenant_rate_limit_rpm).toBe(0);
    // And the new session carries events again.
    await h.sql`update tenant set rate_limit_rpm = 7 where tenant_id = ${t.tenantId}`;
    await within(WITHIN_MS, 'B sees the change on its new session', async () => {
      return (await b.registry.candidate('telegram', digestOf(t)))?.tenant_rate_limit_rpm === 7;
    });
  });

  it('an event for an unknown tenant or object is ignored and counted; a malformed one too; an outbox event once', async () => {
    const t = await seed();
    // The seed's own version events (tenant, binding, secret) can still be on their way to B on a
    // loaded machine, and one arriving after warm() would drop the tenant the outbox event must find
    // cached. NOTIFYs reach a listener in commit order: once a marker sent now has arrived, so have they.
    const marked = b.registry.stats().events.malformed;
    await h.sql`select pg_notify('switchyard_registry', 'seed events delivered')`;
    await waitFor(() => b.registry.stats().events.malformed > marked, {
      label: "the seed's events delivered to B",
      timeoutMs: 5_000,
    });
    await warm(t);
    const before = b.registry.stats();
    await h.sql`select pg_notify('switchyard_registry', ${JSON.stringify({ k: 'tenant', t: 't_unknown', v: 3 })})`;
    await h.sql`select pg_notify('switchyard_registry', ${JSON.stringify({ k: 'binding', t: 't_unknown', id: 'cb_x', v: 1 })})`;
    await h.sql`select pg_notify('switchyard_registry', 'not json')`;
    await h.sql`select pg_notify('switchyard_registry', ${JSON.stringify({ k: 'nonsense', t: t.tenantId })})`;
    const outbox = JSON.stringify({ k: 'tenant_status', t: t.tenantId, v: 9, s: 'active', e: 987_654_321 });
    await h.sql`select pg_notify('switchyard_registry', ${outbox})`;
    await h.sql`select pg_notify('switchyard_registry', ${outbox})`;
    await waitFor(
      () => {
        const s = b.registry.stats();
        return (
          s.events.ignored >= before.events.ignored + 2 && s.events.duplicate >= before.events.duplicate + 1
        );
      },
      { label: 'events counted', timeoutMs: 2_000 },
    );
    const after = b.registry.stats();
    // Other test files' changes reach B too (tenants it does not cache): at least ours.
    expect(after.events.ignored - before.events.ignored).toBeGreaterThanOrEqual(2);
    expect(after.events.malformed - before.events.malformed).toBe(2);
    expect(after.events.applied - before.events.applied).toBe(1);
    expect(after.events.duplicate - before.events.duplicate).toBe(1);
  });

  it('a warm registry: an accepted webhook is one statement (the record), a rejected one none beyond its security event', async () => {
    const t = await seed();
    const sent: string[] = [];
    const sql = postgres(testLoginUrl(inject('databaseUrl'), 'api'), {
      max: 2,
      onnotice: () => undefined,
      // postgres.js reads the array types once per new connection: setup, not a request's statement.
      fetch_types: false,
      debug: (_connection, query) => void sent.push(query.replace(/\s+/g, ' ').trim()),
    });
    extra.push(sql);
    const registry = createConfigRegistry({ sql, ttlMs: TTL_MS });
    const app = newApp({ ...h.appDeps, sql, registry });
    // Cold: the candidate read, then the record.
    expect((await post({ app }, t, 910_006, 'cold')).status).toBe(200);
    expect(sent.filter((q) => q.includes('find_binding_candidate'))).toHaveLength(1);
    sent.length = 0;
    expect((await post({ app }, t, 910_006, 'warm')).status).toBe(200);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toContain('record_inbound_message');
    sent.length = 0;
    expect((await post({ app }, t, 910_006, 'bad', randomBytes(16).toString('hex'))).status).toBe(401);
    expect(sent.filter((q) => !/ingress_security_(event|prune)/.test(q))).toEqual([]);
    expect(sent.filter((q) => q.includes('insert into ingress_security_event'))).toHaveLength(1);
    // An unknown route, asked twice: one read, then remembered (until a binding event).
    sent.length = 0;
    const nowhere = { ...t, routeKey: randomBytes(16).toString('base64url') };
    for (let i = 0; i < 2; i++) expect((await post({ app }, nowhere, 910_006, 'x')).status).toBe(401);
    expect(sent.filter((q) => q.includes('find_binding_candidate'))).toHaveLength(1);
  });

  it('PostgreSQL unreachable: entries serve up to their TTL, then ingress answers 503, never the old status', async () => {
    const t = await seed();
    let clock = Date.now();
    // The registry's own pool: ended below, as if PostgreSQL went away for the registry.
    const registrySql = createSql(testLoginUrl(inject('databaseUrl'), 'api'), { max: 1 });
    const registry = createConfigRegistry({ sql: registrySql, ttlMs: 500, now: () => clock });
    const app = newApp({ ...h.appDeps, registry });
    expect((await post({ app }, t, 910_007, 'fresh')).status).toBe(200);
    await registrySql.end();
    clock += 400; // within the TTL: served from the cache
    expect((await post({ app }, t, 910_007, 'cached')).status).toBe(200);
    clock += 200; // past it: the re-read fails, nothing stale is served
    const res = await post({ app }, t, 910_007, 'stale');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unavailable');
    expect(registry.stats().unavailable).toBe(1);
    const texts = await h.sql<{ text: string }[]>`
      select payload->>'text' as text from message_event where tenant_id = ${t.tenantId} order by event_seq`;
    expect(texts.map((r) => r.text)).toEqual(['fresh', 'cached']);
  });
});
