import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { CHAT_INTERVALS_MS, sendClaimed } from '../../activities/delivery';
import { type EmbeddedDatabase, type EmbeddedOptions, startEmbeddedPostgres } from '../../db/embedded';
import { isTransientDbError } from '../../db/errors';
import { runMigrations } from '../../db/migrate';
import { segmentClaim } from '../../db/queries/steps';
import type { Fault } from '../fakes/http';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { deadLettersOf, segmentsOf } from '../helpers/delivery';
import {
  activitiesOf,
  finished,
  invocationsOfTenant,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const PART = 'The answer continues. '.repeat(120); // > half a Telegram message

/** A regular (not local) activity attempt run by hand; its expected failures are not logged. */
const activityEnv = (info: { attempt: number; heartbeatDetails?: unknown }) =>
  new MockActivityEnvironment({ ...info, isLocal: false }, { logger: new DefaultLogger('ERROR') });

// PostgreSQL restarts right after a provider accepted a call and before the worker recorded it. The
// worker retries the fenced record while its claim's lease lasts, so the receipt lands once the
// database is back: sent (or accepted) once, never an unknown outcome, a dead letter or a resend.
// The suite's shared PostgreSQL cannot be restarted (other files use it), so this file runs its
// worker against a private one, restarted on the same data directory and port.
describe('database restarts between a provider answer and its record', () => {
  let root: string;
  let pgOpts: EmbeddedOptions;
  let db: EmbeddedDatabase | undefined;
  let h: Harness;
  /** A second harness on the private database whose task queue no worker polls (hand-driven tests). */
  let probe: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let restarting: Promise<void> = Promise.resolve();

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'switchyard-blip-'));
    chmodSync(root, 0o755);
    // Not ephemeral: the cluster must survive its own restart (afterAll removes the directory).
    pgOpts = { dataDir: join(root, 'pg'), port: await freePort(), ephemeral: false };
    db = await startEmbeddedPostgres(pgOpts);
    await runMigrations(db.url);
    h = await createHarness({ databaseUrl: db.url });
    probe = await createHarness({ databaseUrl: db.url });
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    await h.startWorker();
  });
  afterAll(async () => {
    await restarting.catch(() => undefined);
    await h?.close();
    await probe?.close();
    await telegram?.close();
    await tools?.close();
    await db?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /**
   * A fake's fault that applies the call, stops PostgreSQL, and only then answers: the worker gets
   * the provider's answer while the database is down. PostgreSQL starts again `downMs` later;
   * `over()` resolves once it is back.
   */
  function outage(downMs = 1500) {
    let begun!: () => void;
    const started = new Promise<void>((r) => {
      begun = r;
    });
    const fault: Fault = {
      kind: 'hold_until',
      until: async () => {
        try {
          await db?.stop();
        } finally {
          restarting = sleep(downMs).then(async () => {
            db = await startEmbeddedPostgres(pgOpts);
          });
          begun();
        }
      },
    };
    return {
      fault,
      async over() {
        await started;
        await restarting;
      },
    };
  }

  /** A fault for the nth request matching `match` (1-based), then none. */
  function nth<R>(n: number, match: (r: R) => boolean, fault: Fault) {
    let seen = 0;
    return (r: R) => (match(r) && ++seen === n ? fault : undefined);
  }

  const sendsTo = (chatId: number) =>
    telegram.requests.filter((r) => r.endpoint === 'sendMessage' && String(r.chatId) === String(chatId));

  const receiptsOf = (tenantId: string) =>
    h.sql<{ segment_index: number; status: string; provider_message_id: string | null; attempts: number }[]>`
      select segment_index, status, provider_message_id, attempts from reply_outbox
      where tenant_id = ${tenantId} order by event_id, segment_index`;

  it('quick first send: the receipt is recorded once PostgreSQL is back — sent once, replied, no dead letter', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const chatId = 81_001;
    const o = outage();
    telegram.setFaultPlan(nth(1, (r) => r.endpoint === 'sendMessage' && r.chatId === chatId, o.fault));

    await sendText(h, t, chatId, 'hello');
    await o.over();
    const msg = await waitForMessage(h.sql, t.tenantId, 'hello', finished, 30_000);

    expect(msg.status).toBe('replied');
    expect(sendsTo(chatId)).toHaveLength(1);
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['You said: hello']);
    expect(await receiptsOf(t.tenantId)).toEqual([
      {
        segment_index: 0,
        status: 'sent',
        provider_message_id: String(telegram.sentTo(chatId)[0]!.messageId),
        attempts: 1,
      },
    ]);
    expect(await deadLettersOf(h, t.tenantId)).toEqual([]);
    // The quick attempt (in startExecution) settled it: no regular send attempt was scheduled.
    expect((await activitiesOf(h, msg.workflow_id)).sendReplySegment).toBeUndefined();
  });

  it('regular attempt: the second segment of a reply is recorded by the attempt that sent it', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: { rules: [], default_reply: `Part one. ${PART}\n\nPart two. ${PART}` },
    });
    telegram.addBot(t.botToken);
    const chatId = 81_002;
    const o = outage();
    telegram.setFaultPlan(nth(2, (r) => r.endpoint === 'sendMessage' && r.chatId === chatId, o.fault));

    await sendText(h, t, chatId, 'two parts please');
    await o.over();
    const msg = await waitForMessage(h.sql, t.tenantId, 'two parts please', finished, 30_000);

    expect(msg.status).toBe('replied');
    const segments = await segmentsOf(h, t.tenantId);
    expect(segments.map((s) => [s.segment_index, s.status, s.attempts, s.last_error])).toEqual([
      [0, 'sent', 1, null],
      [1, 'sent', 1, null],
    ]);
    expect(sendsTo(chatId).map((r) => r.status)).toEqual([200, 200]);
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(segments.map((s) => s.content));
    expect(await deadLettersOf(h, t.tenantId)).toEqual([]);
    // One regular activity, and its first attempt recorded the receipt.
    expect((await activitiesOf(h, msg.workflow_id)).sendReplySegment).toMatchObject({
      scheduled: 1,
      lastAttempt: 1,
    });
  });

  it('tool call: the provider’s 2xx is recorded once PostgreSQL is back — accepted, applied once, no reconciliation', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      tools: [
        {
          name: 'book',
          description: 'book (test tool)',
          parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
          endpoint_url: `${tools.url}/tools/book`,
          side_effect: true,
          idempotency: 'provider_key',
          receipt_url: `${tools.url}/receipts/{key}`,
        },
      ],
      scripted: {
        rules: [
          {
            match: '^book (\\S+)$',
            tool_call: { name: 'book', arguments: { ref: '{{1}}' } },
            reply: 'Booked {{1}}',
          },
        ],
        default_reply: '?',
      },
    });
    telegram.addBot(t.botToken);
    const chatId = 81_003;
    const o = outage();
    tools.setFaultPlan(nth(1, (r) => r.endpoint === 'tool', o.fault));

    await sendText(h, t, chatId, 'book R-7');
    await o.over();
    const msg = await waitForMessage(h.sql, t.tenantId, 'book R-7', finished, 30_000);

    expect(msg.status).toBe('replied');
    const [inv, ...more] = await invocationsOfTenant(h.sql, t.tenantId);
    expect(more).toEqual([]);
    // Dispatched once under its first claim and recorded by it: never taken over for reconciliation.
    expect(inv).toMatchObject({ status: 'accepted', attempts: 1, fencing_token: 1, last_error: null });
    expect(tools.effectCount(inv!.idempotency_key)).toBe(1);
    expect(tools.requests.map((r) => r.endpoint)).toEqual(['tool']);
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['Booked R-7']);
    expect(await deadLettersOf(h, t.tenantId)).toEqual([]);
  });

  /**
   * A tenant with one recorded message whose reply is committed and not yet claimed (its chat is
   * paced, so startExecution's quick attempt declines it), and the worker's activities to drive it
   * by hand: the message goes to the probe harness's task queue, which no worker polls.
   */
  async function committedReply(chatId: number, text: string) {
    const t = await seedTelegramTenant(probe.sql, probe.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    await sendText(probe, t, chatId, text);
    const [event] = await probe.sql<{ event_id: string }[]>`
      select event_id from message_event where tenant_id = ${t.tenantId}`;
    await probe.sql`insert into chat_pacing (tenant_id, binding_id, chat_id, next_allowed_at)
                    values (${t.tenantId}, ${t.bindingId}, ${String(chatId)}, now() + interval '2 seconds')`;
    const deps = {
      sql: probe.sql,
      secrets: probe.secrets,
      log: probe.appDeps.log,
      suspendedReply: 'unused',
      workerId: 'blip-probe',
      sendTimeoutMs: 1000,
    };
    const activities = createActivities(deps);
    const eventId = event!.event_id;
    const started = await activities.startExecution({ tenantId: t.tenantId, eventId, channel: 'telegram' });
    if (started.kind !== 'committed') throw new Error(`expected a committed reply, got ${started.kind}`);
    expect(started.firstSend).toBeNull();
    const segmentId = started.reply.segmentIds[0]!;
    return { t, deps, activities, input: { tenantId: t.tenantId, eventId, segmentId, finish: true } };
  }

  const segmentRow = async (tenantId: string, segmentId: string) =>
    (
      await probe.sql<
        {
          status: string;
          attempts: number;
          fencing_token: number;
          provider_message_id: string | null;
          lease_left_s: number | null;
        }[]
      >`
        select status, attempts, fencing_token, provider_message_id,
               extract(epoch from lease_expires_at - now())::float8 as lease_left_s
        from reply_outbox where tenant_id = ${tenantId} and segment_id = ${segmentId}`
    )[0]!;

  const messageStatus = async (tenantId: string) =>
    (await probe.sql<{ status: string }[]>`select status from message_event where tenant_id = ${tenantId}`)[0]
      ?.status;

  it('a regular attempt keeps the receipt in its heartbeat before recording it', async () => {
    const { t, activities, input } = await committedReply(82_001, 'keep it');
    const beats: unknown[] = [];
    const env = activityEnv({ attempt: 1 });
    env.on('heartbeat', (d: unknown) => beats.push(d));

    const result = await env.run(activities.sendReplySegment, input);

    expect(result).toMatchObject({ status: 'sent', finished: { status: 'replied' } });
    const row = await segmentRow(t.tenantId, input.segmentId);
    const [sent] = telegram.sentTo(82_001);
    expect(row).toMatchObject({ status: 'sent', attempts: 1, provider_message_id: String(sent!.messageId) });
    expect(beats).toEqual([
      {
        receipt: {
          segmentId: input.segmentId,
          fencingToken: row.fencing_token,
          providerMessageId: String(sent!.messageId),
        },
      },
    ]);
  });

  it('the next attempt records the receipt its dead predecessor kept, under that claim: no resend, no unknown outcome', async () => {
    const { t, activities, input } = await committedReply(82_002, 'died after the send');
    // The attempt that sent it: claimed, sent (provider message 9001), died before recording it,
    // and its lease has run out since (0 s: expired at once).
    const dead = await segmentClaim(probe.sql, {
      tenantId: t.tenantId,
      segmentId: input.segmentId,
      owner: 'dead-attempt',
      leaseSeconds: 0,
      intervalsMs: CHAT_INTERVALS_MS,
      maxWaitMs: null,
    });
    expect(dead).toMatchObject({ claimed: true, status: 'sending' });
    const receipt = {
      segmentId: input.segmentId,
      fencingToken: dead!.fencing_token,
      providerMessageId: '9001',
    };
    const beats: unknown[] = [];
    const env = activityEnv({ attempt: 2, heartbeatDetails: { receipt } });
    env.on('heartbeat', (d: unknown) => beats.push(d));

    const result = await env.run(activities.sendReplySegment, input);

    expect(result).toMatchObject({ status: 'sent', finished: { status: 'replied' } });
    // Recorded under the dead attempt's claim: not claimed again, not sent again.
    expect(await segmentRow(t.tenantId, input.segmentId)).toMatchObject({
      status: 'sent',
      attempts: 1,
      fencing_token: dead!.fencing_token,
      provider_message_id: '9001',
    });
    expect(sendsTo(82_002)).toEqual([]);
    expect(await deadLettersOf(probe, t.tenantId)).toEqual([]);
    expect(await messageStatus(t.tenantId)).toBe('replied');
    // Kept again, in case this attempt died too.
    expect(beats).toEqual([{ receipt }]);
  });

  it('lease margin: a claim with less lease left than the worst-case send is extended before the send', async () => {
    const { t, deps, input } = await committedReply(82_003, 'short lease');
    let leftAtSend: number | null = null;
    telegram.setFaultPlan(
      nth(1, (r) => r.endpoint === 'sendMessage' && r.chatId === 82_003, {
        kind: 'hold_until',
        until: async () => {
          leftAtSend = (await segmentRow(t.tenantId, input.segmentId)).lease_left_s;
        },
      }),
    );
    // A 3 s lease, with a ~2 s pacing wait ahead and a 1 s send timeout: the send (and its receipt,
    // with the 5 s margin) would outlive it.
    const claimedAt = performance.now();
    const seg = await segmentClaim(probe.sql, {
      tenantId: t.tenantId,
      segmentId: input.segmentId,
      owner: 'short-lease',
      leaseSeconds: 3,
      intervalsMs: CHAT_INTERVALS_MS,
      maxWaitMs: null,
    });
    expect(seg).toMatchObject({ claimed: true });
    expect(seg!.wait_ms).toBeGreaterThan(1000);

    const env = activityEnv({ attempt: 1 });
    const result = await env.run(() =>
      sendClaimed(deps, { tenantId: t.tenantId, finish: true, quick: false, claimedAt }, seg!),
    );

    expect(result).toMatchObject({ status: 'sent', finished: { status: 'replied' } });
    // Without the extension the 3 s lease would have had about 1 s left when the request went out.
    expect(leftAtSend).not.toBeNull();
    expect(leftAtSend!).toBeGreaterThan(5);
    expect(sendsTo(82_003)).toHaveLength(1);
    expect(await segmentRow(t.tenantId, input.segmentId)).toMatchObject({
      status: 'sent',
      attempts: 1,
      fencing_token: seg!.fencing_token,
    });
  });

  it('lease margin: a claim taken over meanwhile is not extended — FencedOut, nothing sent', async () => {
    const { t, deps, input } = await committedReply(82_004, 'taken over');
    const claim = (owner: string, leaseSeconds: number) =>
      segmentClaim(probe.sql, {
        tenantId: t.tenantId,
        segmentId: input.segmentId,
        owner,
        leaseSeconds,
        intervalsMs: CHAT_INTERVALS_MS,
        maxWaitMs: null,
      });
    const claimedAt = performance.now();
    const stale = await claim('stale', 0);
    const newer = await claim('newer', 60);
    expect(newer).toMatchObject({ claimed: true, taken_over: true, fencing_token: stale!.fencing_token + 1 });

    const env = activityEnv({ attempt: 1 });
    await expect(
      env.run(() =>
        sendClaimed(deps, { tenantId: t.tenantId, finish: true, quick: false, claimedAt }, stale!),
      ),
    ).rejects.toMatchObject({ type: 'FencedOut' });
    expect(sendsTo(82_004)).toEqual([]);
    // The newer claim is untouched.
    expect(await segmentRow(t.tenantId, input.segmentId)).toMatchObject({
      status: 'sending',
      fencing_token: newer!.fencing_token,
    });
  });

  it('isTransientDbError: refused, terminated and shut-down connections are transient; statement errors are not', async () => {
    const url = db!.url;
    const errorOf = async (run: (sql: postgres.Sql) => Promise<unknown>, target = url) => {
      const sql = postgres(target, { max: 1, connect_timeout: 5, onnotice: () => undefined });
      try {
        await run(sql);
        return null;
      } catch (err) {
        return err;
      } finally {
        await sql.end({ timeout: 1 }).catch(() => undefined);
      }
    };
    const refused = await errorOf((sql) => sql`select 1`, url.replace(/:\d+\//, `:${await freePort()}/`));
    const terminated = await errorOf((sql) => sql`select pg_terminate_backend(pg_backend_pid())`);
    const ended = postgres(url, { max: 1 });
    await ended.end();
    const afterEnd = await ended`select 1`.catch((err: unknown) => err);
    const divide = await errorOf((sql) => sql`select 1 / 0`);
    const syntax = await errorOf((sql) => sql.unsafe('selec 1'));
    const timeout = await errorOf(async (sql) => {
      await sql`set statement_timeout = '50ms'`;
      await sql`select pg_sleep(1)`;
    });

    expect(refused).toMatchObject({ code: 'ECONNREFUSED' });
    // admin_shutdown (57P01), or the closed socket when it wins the race with the error message.
    expect(['57P01', 'CONNECTION_CLOSED']).toContain((terminated as { code?: string }).code);
    for (const err of [refused, terminated]) expect(isTransientDbError(err)).toBe(true);
    expect(divide).toMatchObject({ code: '22012' });
    expect(syntax).toMatchObject({ code: '42601' });
    expect(timeout).toMatchObject({ code: '57014' });
    // This process ended its own client: no retry on it can succeed.
    expect(afterEnd).toMatchObject({ code: 'CONNECTION_ENDED' });
    for (const err of [divide, syntax, timeout, afterEnd]) expect(isTransientDbError(err)).toBe(false);

    // What a restart and a failover look like from a client, by code.
    for (const code of [
      '57P02',
      '57P03',
      '08006',
      '08001',
      'ECONNRESET',
      'CONNECTION_CLOSED',
      'CONNECTION_DESTROYED',
    ])
      expect(isTransientDbError(Object.assign(new Error(code), { code }))).toBe(true);
    const refusedEverywhere = new AggregateError([refused, refused], 'connect ECONNREFUSED');
    expect(isTransientDbError(refusedEverywhere)).toBe(true);
    expect(isTransientDbError(new Error('wrapped', { cause: refused }))).toBe(true);
    for (const other of [new Error('boom'), { code: '40001' }, { code: '23505' }, null, 'ECONNREFUSED'])
      expect(isTransientDbError(other)).toBe(false);
  });
});
