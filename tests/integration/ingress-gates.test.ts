import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newApp } from '../../api/app';
import { createSql } from '../../db/client';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { sweepNow } from '../helpers/sweep';
import { waitFor } from '../helpers/wait';

describe('trusted ingress: gates, ordering and the start reconciler', () => {
  let h: Harness;
  let telegram: FakeTelegram;

  // A real client pointed at a port where no Temporal listens: every start fails as in an outage.
  let down: Client;
  let appDown: Harness['app'];

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    await h.startWorker();
    down = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500 }) });
    appDown = newApp({ ...h.appDeps, temporal: down });
  });
  afterAll(async () => {
    await down?.connection.close().catch(() => undefined);
    await h?.close();
    await telegram?.close();
  });

  const post = (app: Harness['app'], routeKey: string, body: unknown, secret: string) =>
    app.request(`/v1/webhooks/telegram/${routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
      body: JSON.stringify(body),
    });

  it('a suspended tenant records the message and replies with the fixed fallback, without running the agent', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      tenantStatus: 'suspended',
    });
    telegram.addBot(t.botToken);
    const res = await post(
      h.app,
      t.routeKey,
      telegramTextUpdate({ chatId: 5001, text: 'are you there?' }),
      t.webhookSecret,
    );
    expect(res.status).toBe(200);
    await telegram.waitForSent(1, 20_000).catch(() => undefined);
    await waitFor(() => telegram.sentTo('5001').length === 1, { label: 'fallback reply' });
    expect(telegram.sentTo('5001')[0]!.text).toBe('This service is temporarily unavailable.');
    await waitFor(
      async () => {
        const [row] = await h.sql<{ status: string; outcome: string; execution_plan: unknown }[]>`
        select status, outcome, execution_plan from message_event where tenant_id = ${t.tenantId}`;
        return row?.status === 'replied' && row.outcome === 'tenant_suspended' && row.execution_plan === null;
      },
      { label: 'suspended message replied' },
    );
  });

  it('a disabled tenant is not routed: the fixed 401 and no row', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    await h.sql`update tenant set status = 'disabled' where tenant_id = ${t.tenantId}`;
    const res = await post(
      h.app,
      t.routeKey,
      telegramTextUpdate({ chatId: 5002, text: 'hi' }),
      t.webhookSecret,
    );
    expect(res.status).toBe(401);
    expect(await h.sql`select 1 from message_event where tenant_id = ${t.tenantId}`).toHaveLength(0);
  });

  it('rate_limit_rpm is enforced per tenant: over the limit is recorded as rate_limited, answered 200, never executed', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    await h.sql`update tenant set rate_limit_rpm = 2 where tenant_id = ${t.tenantId}`;
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (await post(h.app, t.routeKey, telegramTextUpdate({ chatId: 5003, text: `m${i}` }), t.webhookSecret))
          .status,
      );
    }
    expect(statuses).toEqual([200, 200, 200, 200]);
    const rows = await h.sql<{ outcome: string | null; workflow_started: boolean }[]>`
      select outcome from message_event where tenant_id = ${t.tenantId} order by event_seq`;
    expect(rows.map((r) => r.outcome)).toEqual([null, null, 'rate_limited', 'rate_limited']);
    await waitFor(() => telegram.sentTo('5003').length === 2, { label: 'two replies' });
    await new Promise((r) => setTimeout(r, 500));
    expect(telegram.sentTo('5003')).toHaveLength(2);
  });

  it('two API instances share the rate limit, and a duplicate consumes neither event_seq nor the limit', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    await h.sql`update tenant set rate_limit_rpm = 3 where tenant_id = ${t.tenantId}`;
    // The limit counts per calendar minute (rate_limit_window): the posts below must not straddle
    // one, or the fourth opens a fresh window and passes. Past second 55, wait for the next minute.
    const [{ s } = { s: 0 }] = await h.sql<{ s: number }[]>`select extract(second from now())::float8 as s`;
    if (s > 55) await new Promise((r) => setTimeout(r, (60.2 - s) * 1000));
    // A second instance: its own app and its own connection pool, as another API process has.
    const otherSql = createSql(inject('databaseUrl'), { max: 4 });
    try {
      const other = newApp({ ...h.appDeps, sql: otherSql });
      const updates = [0, 1, 2, 3].map((i) => telegramTextUpdate({ chatId: 5005, text: `m${i}` }));
      const m = (i: number) => updates[i];
      expect((await post(h.app, t.routeKey, m(0), t.webhookSecret)).status).toBe(200);
      const retries = await Promise.all(
        [h.app, other, other].map((app) => post(app, t.routeKey, m(0), t.webhookSecret)),
      );
      expect(retries.map((r) => r.status)).toEqual([200, 200, 200]);
      expect((await post(other, t.routeKey, m(1), t.webhookSecret)).status).toBe(200);
      expect((await post(h.app, t.routeKey, m(2), t.webhookSecret)).status).toBe(200);
      expect((await post(other, t.routeKey, m(3), t.webhookSecret)).status).toBe(200);
      expect((await post(h.app, t.routeKey, m(3), t.webhookSecret)).status).toBe(200);
    } finally {
      await otherSql.end({ timeout: 2 });
    }
    const rows = await h.sql<{ event_seq: number; outcome: string | null }[]>`
      select event_seq, outcome from message_event where tenant_id = ${t.tenantId} order by event_seq`;
    expect(rows.map((r) => [Number(r.event_seq), r.outcome])).toEqual([
      [1, null],
      [2, null],
      [3, null],
      [4, 'rate_limited'],
    ]);
    const [window] = await h.sql<{ count: number }[]>`
      select sum(count)::int as count from rate_limit_window where tenant_id = ${t.tenantId}`;
    expect(window!.count).toBe(4);
    await waitFor(() => telegram.sentTo('5005').length === 3, { label: 'three replies' });
  });

  it('rate_limit_rpm = 0 rejects every new message', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    await h.sql`update tenant set rate_limit_rpm = 0 where tenant_id = ${t.tenantId}`;
    expect(
      (await post(h.app, t.routeKey, telegramTextUpdate({ chatId: 5004, text: 'x' }), t.webhookSecret))
        .status,
    ).toBe(200);
    const [row] = await h.sql<
      { status: string; outcome: string }[]
    >`select status, outcome from message_event where tenant_id = ${t.tenantId}`;
    expect(row).toEqual({ status: 'failed', outcome: 'rate_limited' });
  });

  it('3 sessions × 20 interleaved messages: event_seq is gap-free per session', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const chats = [6001, 6002, 6003];
    const updates = Array.from({ length: 20 }, (_, i) =>
      chats.map((chatId) => telegramTextUpdate({ chatId, text: `n${i}` })),
    ).flat();
    // Ten concurrent requests at a time, interleaving the three chats.
    for (let i = 0; i < updates.length; i += 10) {
      const batch = await Promise.all(
        updates.slice(i, i + 10).map((u) => post(h.app, t.routeKey, u, t.webhookSecret)),
      );
      expect(batch.every((r) => r.status === 200)).toBe(true);
    }
    const rows = await h.sql<{ session_id: string; seqs: number[] }[]>`
      select session_id, array_agg(event_seq order by event_seq) as seqs
      from message_event where tenant_id = ${t.tenantId} group by session_id`;
    expect(rows).toHaveLength(3);
    for (const r of rows) expect(r.seqs.map(Number)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('a message recorded while Temporal was down is acknowledged (200), and the sweeper starts it exactly once', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const update = telegramTextUpdate({ chatId: 7001, text: 'during the outage' });
    const res = await post(appDown, t.routeKey, update, t.webhookSecret);
    // Recorded means acknowledged: a 503 would make Telegram stall the bot's whole update stream.
    expect(res.status).toBe(200);
    const [row] = await h.sql<
      { status: string; event_id: string }[]
    >`select status, event_id from message_event where tenant_id = ${t.tenantId}`;
    expect(row!.status).toBe('received');

    const first = await sweepNow(h, [t.tenantId]);
    expect(first.started).toBe(1);
    // A provider retry arrives too (a copy of the update): still one workflow, one reply.
    expect((await post(h.app, t.routeKey, update, t.webhookSecret)).status).toBe(200);
    await sweepNow(h, [t.tenantId]);
    await waitFor(() => telegram.sentTo('7001').length >= 1, { label: 'reply after reconcile' });
    await new Promise((r) => setTimeout(r, 500));
    expect(telegram.sentTo('7001')).toHaveLength(1);
  });

  it('a never-started message past the age limit goes to the DLQ instead of being replayed', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const res = await post(
      appDown,
      t.routeKey,
      telegramTextUpdate({ chatId: 7002, text: 'old' }),
      t.webhookSecret,
    );
    expect(res.status).toBe(200);
    await h.sql`update message_event set created_at = now() - interval '2 days' where tenant_id = ${t.tenantId}`;
    const report = await sweepNow(h, [t.tenantId], { maxAgeSeconds: 3600 });
    expect(report.deadLettered).toBe(1);
    const [row] = await h.sql<
      { status: string; outcome: string }[]
    >`select status, outcome from message_event where tenant_id = ${t.tenantId}`;
    expect(row).toEqual({ status: 'failed', outcome: 'start_expired' });
    const dl = await h.sql`select kind, reason_class from dead_letter where tenant_id = ${t.tenantId}`;
    expect(dl).toEqual([{ kind: 'execution', reason_class: 'start_expired' }]);
  });

  it('expiring a never-started message wakes the next message of its chat at once (not a pass later)', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const old = telegramTextUpdate({ chatId: 7003, text: 'lost in the outage' });
    expect((await post(appDown, t.routeKey, old, t.webhookSecret)).status).toBe(200);
    await h.sql`update message_event set created_at = now() - interval '2 days' where tenant_id = ${t.tenantId}`;
    // The chat's next message starts and waits for its turn behind the never-started one.
    const next = telegramTextUpdate({ chatId: 7003, text: 'anyone there?' });
    expect((await post(h.app, t.routeKey, next, t.webhookSecret)).status).toBe(200);
    await waitFor(
      async () => {
        const rows = await h.sql<{ n: number }[]>`
          select count(*)::int as n from message_event
          where tenant_id = ${t.tenantId} and workflow_started_at is not null`;
        return rows[0]!.n === 1;
      },
      { label: 'the next message waiting for its turn' },
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(telegram.sentTo('7003')).toHaveLength(0);

    // One pass: the old message is dead-lettered and its successor woken by it. The successor is
    // no sweep candidate yet (started, not stale), so no later pass is what frees it here.
    const report = await sweepNow(h, [t.tenantId], { maxAgeSeconds: 3600 });
    expect(report.deadLettered).toBe(1);
    await waitFor(() => telegram.sentTo('7003').length === 1, {
      label: 'the next message replied',
      timeoutMs: 10_000,
    });
    expect(telegram.sentTo('7003')[0]!.text).toContain('anyone there?');
  });
});
