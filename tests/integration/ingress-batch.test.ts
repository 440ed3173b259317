import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { createLateRecorder } from '../../api/ingress/late-record';
import { createRecordBatcher } from '../../api/ingress/record-batcher';
import { createBoundedWaitSql, createSql } from '../../db/client';
import { newId } from '../../db/ids';
import {
  type RecordedMessage,
  type RecordMessageParams,
  recordInboundMessage,
} from '../../db/queries/ingress';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { createHarness, type Harness } from '../helpers/harness';
import { holdLock } from '../helpers/hold-lock';
import { recordParamsOf } from '../helpers/record-params';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Group commit at ingress (api/ingress/record-batcher.ts): webhooks that arrive together share one
// record statement. What must not change is what each webhook gets: recorded once, duplicates
// answered as duplicates, event_seq gap-free per session in arrival order, the rate limit exact,
// and a row that cannot be recorded failing only its own webhook.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('ingress group commit', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
  });

  /** Holds a chat's session row (as a finishing message does, for longer) until release(). */
  const holdSessionRow = (tenantId: string, sessionId: string) =>
    holdLock(
      h.sql,
      (tx) =>
        tx`select 1 from session where tenant_id = ${tenantId} and session_id = ${sessionId} for update`,
    );

  it('concurrent records share statements and each gets what its own call would', async () => {
    const a = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const b = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    // One statement at a time: everything that arrives meanwhile queues into the next batch.
    const batcher = createRecordBatcher(h.apiSql, { maxInFlight: 1 });
    const submitted: { p: RecordMessageParams; limited: boolean }[] = [];
    for (let i = 0; i < 120; i++) {
      const t = i % 3 === 0 ? b : a;
      const p = recordParamsOf(t, `chat-${i % 7}`, `m-${i}`);
      // Tenant b allows 30 a minute: what is over it is recorded as rate_limited.
      submitted.push({ p: t === b ? { ...p, rateLimitRpm: 30 } : p, limited: false });
    }
    // Provider retries racing the original: the same external ids again, some in the same batch.
    const retries = [5, 6, 40, 41, 119].map((i) => ({
      p: { ...submitted[i]!.p, eventId: newId('evt') },
      limited: false,
    }));
    const all = [...submitted, ...retries];
    const results = await Promise.all(all.map((s) => batcher.record(s.p)));

    const stats = batcher.stats();
    expect(stats.rows).toBe(all.length);
    expect(stats.largest).toBeGreaterThan(1);
    expect(stats.statements).toBeLessThan(all.length);
    expect(stats.fallbacks).toBe(0);

    // Each original recorded (or rate limited) under its own event id; each retry answers with it.
    const byExternal = new Map<string, RecordedMessage>();
    for (const [i, r] of results.slice(0, submitted.length).entries()) {
      expect(['recorded', 'rate_limited']).toContain(r.kind);
      expect(r.event_id).toBe(submitted[i]!.p.eventId);
      byExternal.set(submitted[i]!.p.message.externalMessageId, r);
    }
    for (const [i, r] of results.slice(submitted.length).entries()) {
      const original = byExternal.get(retries[i]!.p.message.externalMessageId)!;
      expect(r).toEqual({ kind: 'duplicate', event_id: original.event_id, status: original.status });
    }
    const rows = await h.sql<
      { tenant_id: string; external_message_id: string; status: string; outcome: string | null }[]
    >`
      select tenant_id, external_message_id, status, outcome from message_event
      where tenant_id in (${a.tenantId}, ${b.tenantId})`;
    expect(rows).toHaveLength(submitted.length);
    const bRows = rows.filter((r) => r.tenant_id === b.tenantId);
    expect(bRows.filter((r) => r.outcome === 'rate_limited')).toHaveLength(bRows.length - 30);

    // event_seq per session: 1..n without gaps, in the order the webhooks arrived.
    const seqs = await h.sql<{ session_id: string; event_id: string; event_seq: number }[]>`
      select session_id, event_id, event_seq from message_event
      where tenant_id in (${a.tenantId}, ${b.tenantId}) order by session_id, event_seq`;
    const arrival = new Map(submitted.map((s, i) => [s.p.eventId, i]));
    const bySession = new Map<string, { seq: number; at: number }[]>();
    for (const s of seqs)
      bySession.set(s.session_id, [
        ...(bySession.get(s.session_id) ?? []),
        { seq: s.event_seq, at: arrival.get(s.event_id)! },
      ]);
    expect(bySession.size).toBe(14); // 7 chats in each tenant
    for (const list of bySession.values()) {
      expect(list.map((x) => x.seq)).toEqual(list.map((_x, i) => i + 1));
      expect(list.map((x) => x.at)).toEqual([...list.map((x) => x.at)].sort((x, y) => x - y));
    }
    const [sessions] = await h.sql<{ max_seq_ok: boolean }[]>`
      select bool_and(s.last_event_seq = (select count(*) from message_event e
                                          where e.tenant_id = s.tenant_id and e.session_id = s.session_id)) as max_seq_ok
      from session s where s.tenant_id in (${a.tenantId}, ${b.tenantId})`;
    expect(sessions!.max_seq_ok).toBe(true);
  });

  it('concurrent batches over the same sessions keep each session in arrival order and never deadlock', async () => {
    const a = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const b = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const batcher = createRecordBatcher(h.apiSql, { maxInFlight: 4, maxBatch: 16 });
    // Chats interleaved differently over time, so batches meet the same sessions in other orders;
    // tenant a's rows disagree on its rate limit (a limit that was just changed, read by some
    // requests and not others), tenant b has none (no window row to queue on, only the sessions).
    const ps = Array.from({ length: 400 }, (_x, i) => {
      const chat = (i * 7 + Math.floor(i / 16)) % 10;
      const p = recordParamsOf(i % 2 ? a : b, `chat-${chat}`, `c-${i}`);
      return i % 2 && i % 3 === 0 ? { ...p, rateLimitRpm: 100_000 } : p;
    });
    const results = await Promise.all(ps.map((p) => batcher.record(p)));
    expect(results.every((r) => r.kind === 'recorded')).toBe(true);
    // A deadlock would have failed a batch (PostgreSQL aborts one side) and sent it row by row.
    expect(batcher.stats().fallbacks).toBe(0);
    expect(batcher.stats().largest).toBeGreaterThan(1);
    const rows = await h.sql<{ session_id: string; event_id: string; event_seq: number }[]>`
      select session_id, event_id, event_seq from message_event
      where tenant_id in (${a.tenantId}, ${b.tenantId}) order by session_id, event_seq`;
    const arrival = new Map(ps.map((p, i) => [p.eventId, i]));
    const bySession = new Map<string, { seq: number; at: number }[]>();
    for (const r of rows)
      bySession.set(r.session_id, [
        ...(bySession.get(r.session_id) ?? []),
        { seq: r.event_seq, at: arrival.get(r.event_id)! },
      ]);
    expect(bySession.size).toBe(20);
    for (const list of bySession.values()) {
      expect(list.map((x) => x.seq)).toEqual(list.map((_x, i) => i + 1));
      expect(list.map((x) => x.at)).toEqual([...list.map((x) => x.at)].sort((x, y) => x - y));
    }
  });

  it('a database that cannot be reached fails every webhook of a batch at once, not row by row', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const gone = createSql('postgres://switchyard:x@127.0.0.1:9/switchyard', { max: 2 });
    try {
      const batcher = createRecordBatcher(gone, { maxInFlight: 1 });
      const settled = await Promise.allSettled(
        Array.from({ length: 10 }, (_x, i) => batcher.record(recordParamsOf(t, 'chat-1', `gone-${i}`))),
      );
      expect(settled.every((s) => s.status === 'rejected')).toBe(true);
      expect(batcher.stats().fallbacks).toBe(0);
      expect(batcher.stats().statements).toBeLessThan(10);
    } finally {
      await gone.end({ timeout: 1 });
    }
  });

  it('a row that cannot be recorded fails only its own webhook; the rest of its batch is recorded', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const batcher = createRecordBatcher(h.apiSql, { maxInFlight: 1 });
    const good = Array.from({ length: 12 }, (_x, i) => recordParamsOf(t, `chat-${i % 3}`, `g-${i}`));
    // A group session without its chat: the session's identity check refuses it.
    const bad: RecordMessageParams = {
      ...recordParamsOf(t, 'chat-x', 'bad-1'),
      identity: { kind: 'group', externalUserId: 'u', externalChatId: null, externalThreadId: null },
    };
    const settled = await Promise.allSettled(
      [...good.slice(0, 6), bad, ...good.slice(6)].map((p) => batcher.record(p)),
    );
    expect(settled[6]!.status).toBe('rejected');
    expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(12);
    expect(batcher.stats().fallbacks).toBeGreaterThan(0);
    const rows = await h.sql<{ external_message_id: string }[]>`
      select external_message_id from message_event where tenant_id = ${t.tenantId} order by external_message_id`;
    expect(rows.map((r) => r.external_message_id).sort()).toEqual(
      good.map((p) => p.message.externalMessageId).sort(),
    );
  });

  it('through the webhook route: concurrent updates of a few chats are each recorded once, in order', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const updates = Array.from({ length: 60 }, (_x, i) =>
      telegramTextUpdate({ chatId: 7100 + (i % 4), text: `u${i}` }),
    );
    const post = (body: unknown) =>
      h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
        body: JSON.stringify(body),
      });
    const statuses = await Promise.all(
      [...updates, updates[3], updates[30]].map(async (u) => (await post(u)).status),
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    const rows = await h.sql<{ session_id: string; event_seq: number; text: string }[]>`
      select session_id, event_seq, payload->>'text' as text from message_event
      where tenant_id = ${t.tenantId} order by session_id, event_seq`;
    expect(rows).toHaveLength(60);
    const bySession = new Map<string, number[]>();
    for (const r of rows) bySession.set(r.session_id, [...(bySession.get(r.session_id) ?? []), r.event_seq]);
    expect([...bySession.values()].map((s) => s.join(','))).toEqual(
      Array.from({ length: 4 }, () => Array.from({ length: 15 }, (_x, i) => i + 1).join(',')),
    );
  });

  it('a record stuck behind a lock answers 503 within its bound; it is recorded (and started) once the lock is gone, and the redelivery is a duplicate', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const bounded = createBoundedWaitSql(h.apiSql, {
      max: 2,
      lockTimeoutMs: 300,
      applicationName: 'test-ingress',
    });
    // Late tries wait 50 ms at most, as the product's wait 200 ms against its ingress's 3 s.
    const latePool = createBoundedWaitSql(h.apiSql, {
      max: 2,
      lockTimeoutMs: 50,
      applicationName: 'test-late',
    });
    // A rate limit: every record of the tenant takes its window row before the chat's session.
    await h.sql`update tenant set rate_limit_rpm = 10000 where tenant_id = ${t.tenantId}`;
    try {
      const app = newApp({ ...h.appDeps, ingressSql: bounded, lateSql: latePool });
      const post = (body: unknown) =>
        app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
          body: JSON.stringify(body),
        });
      expect((await post(telegramTextUpdate({ chatId: 7301, text: 'first' }))).status).toBe(200);
      const [session] = await h.sql<{ session_id: string }[]>`
        select session_id from message_event where tenant_id = ${t.tenantId}`;
      const lock = await holdSessionRow(t.tenantId, session!.session_id);
      const second = telegramTextUpdate({ chatId: 7301, text: 'second' });
      const startedAt = performance.now();
      const recordedSecond = async () =>
        h.sql<{ workflow_id: string }[]>`
          select workflow_id from message_event where tenant_id = ${t.tenantId} and payload->>'text' = 'second'`;
      let res: Response;
      let tookMs: number;
      try {
        // An unbounded record would wait for the holder: fail instead of hanging.
        res = await Promise.race([
          post(second),
          sleep(10_000).then(() => Promise.reject(new Error('the record was not bounded'))),
        ]);
        tookMs = performance.now() - startedAt;
        // Answered, not recorded: the late record waits for the lock in the background.
        expect(await recordedSecond()).toHaveLength(0);
        // Meanwhile the tenant's other chats are recorded within the bound: the late record's
        // tries never hold the tenant's rate-limit window while they wait for the stuck chat.
        for (let i = 0; i < 5; i++) {
          expect((await post(telegramTextUpdate({ chatId: 7400 + i, text: `other ${i}` }))).status).toBe(200);
          await sleep(150);
        }
      } finally {
        await lock.release();
      }
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unavailable');
      expect(tookMs).toBeLessThan(3_000);
      // No redelivery needed (WeCom's may be over by then): recorded and its workflow started.
      await waitFor(async () => (await recordedSecond()).length === 1, {
        timeoutMs: 10_000,
        label: 'the late record',
      });
      const [late] = await recordedSecond();
      await waitFor(
        async () =>
          (await h.temporal.workflow
            .getHandle(late!.workflow_id)
            .describe()
            .then(() => true)
            .catch(() => false)) === true,
        { timeoutMs: 10_000, label: 'the late record’s workflow' },
      );
      // The provider's redelivery finds it recorded: acknowledged, nothing twice.
      expect((await post(second)).status).toBe(200);
      expect((await post(second)).status).toBe(200);
      const rows = await h.sql<{ text: string; event_seq: number }[]>`
        select payload->>'text' as text, event_seq from message_event
        where tenant_id = ${t.tenantId} and payload->>'chatId' = '7301' order by event_seq`;
      expect(rows).toEqual([
        { text: 'first', event_seq: 1 },
        { text: 'second', event_seq: 2 },
      ]);
    } finally {
      await bounded.end({ timeout: 5 });
      await latePool.end({ timeout: 5 });
    }
  });

  it('in a batch, a tenant stuck behind a lock fails only its own webhooks; the other tenants are recorded', async () => {
    const a = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const b = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const bounded = createBoundedWaitSql(h.apiSql, {
      max: 1,
      lockTimeoutMs: 300,
      applicationName: 'test-ingress',
    });
    let lock: { release(): Promise<void> } | undefined;
    try {
      const batcher = createRecordBatcher(bounded, { maxInFlight: 1 });
      const first = recordParamsOf(a, 'chat-stuck', 's-1');
      expect((await batcher.record(first)).kind).toBe('recorded');
      const [session] = await h.sql<{ session_id: string }[]>`
        select session_id from message_event where tenant_id = ${a.tenantId} and event_id = ${first.eventId}`;
      lock = await holdSessionRow(a.tenantId, session!.session_id);
      // The first goes alone; the rest queue behind it and share the next statement.
      const opener = batcher.record(recordParamsOf(b, 'chat-b0', 'b-0'));
      const stuck = recordParamsOf(a, 'chat-stuck', 's-2');
      const others = [recordParamsOf(b, 'chat-b1', 'b-1'), recordParamsOf(b, 'chat-b2', 'b-2')];
      const sameTenant = recordParamsOf(a, 'chat-zzz', 's-3');
      const settled = await Promise.race([
        Promise.allSettled([opener, ...[stuck, ...others, sameTenant].map((p) => batcher.record(p))]),
        sleep(15_000).then(() => Promise.reject(new Error('the batch was not bounded'))),
      ]);
      await lock.release();
      const codes = settled.map((r) =>
        r.status === 'fulfilled' ? r.value.kind : (r.reason as { code?: string }).code,
      );
      // b's three recorded; a's stuck row timed out, a's row of a later chat (sorted after it) failed with it, unsent.
      expect(codes).toEqual(['recorded', '55P03', 'recorded', 'recorded', '55P03']);
      expect(batcher.stats().largest).toBeGreaterThan(1);
      const rows = await h.sql<{ tenant_id: string }[]>`
        select tenant_id from message_event where tenant_id in (${a.tenantId}, ${b.tenantId})`;
      expect(rows.filter((r) => r.tenant_id === b.tenantId)).toHaveLength(3);
      expect(rows.filter((r) => r.tenant_id === a.tenantId)).toHaveLength(1);
    } finally {
      await lock?.release();
      await bounded.end({ timeout: 5 });
    }
  });

  it('late records: one carry per message however often it is redelivered, at most the bound at once', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const latePool = createBoundedWaitSql(h.apiSql, {
      max: 2,
      lockTimeoutMs: 50,
      applicationName: 'test-late',
    });
    let lock: { release(): Promise<void> } | undefined;
    try {
      const first = recordParamsOf(t, 'chat-late', 'l-0');
      expect((await recordInboundMessage(h.apiSql, first)).kind).toBe('recorded');
      const [session] = await h.sql<{ session_id: string }[]>`
        select session_id from message_event where tenant_id = ${t.tenantId} and event_id = ${first.eventId}`;
      lock = await holdSessionRow(t.tenantId, session!.session_id);
      const late = createLateRecorder(latePool, { max: 2, log: h.appDeps.log, retryMs: 100 });
      const started: string[] = [];
      const then = async (r: RecordedMessage) => {
        started.push(r.event_id);
      };
      const [a, b, c] = ['l-1', 'l-2', 'l-3'].map((id) => recordParamsOf(t, 'chat-late', id));
      // A redelivery of a carried message (same idempotency key, a new event id) joins its carry.
      expect([
        late.submit(a!, then),
        late.submit({ ...a!, eventId: newId('evt') }, then),
        late.submit(b!, then),
        late.submit(c!, then),
      ]).toEqual([true, true, true, false]);
      await sleep(300); // a few tries, each refused by the lock
      expect(started).toEqual([]);
      await lock.release();
      await waitFor(async () => started.length >= 2, { timeoutMs: 10_000, label: 'both carried records' });
      await sleep(500); // a second carry of `a` would have answered by now
      expect(started.sort()).toEqual([a!.eventId, b!.eventId].sort());
      // The two carries race for the lock once it is gone: either may be recorded first.
      const rows = await h.sql<{ external_message_id: string }[]>`
        select external_message_id from message_event where tenant_id = ${t.tenantId}`;
      expect(rows.map((r) => r.external_message_id).sort()).toEqual(['l-0', 'l-1', 'l-2']);
    } finally {
      await lock?.release();
      await latePool.end({ timeout: 5 });
    }
  });
});
