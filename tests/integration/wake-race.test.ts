import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InboundMessage } from '../../channels/inbound';
import { newId } from '../../db/ids';
import { type RecordMessageParams, recordInboundMessage } from '../../db/queries/ingress';
import { executionStart, messageFinish } from '../../db/queries/steps';
import { sha256Hex } from '../../lib/digest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { createHarness, type Harness } from '../helpers/harness';
import { type SeededTelegram, seedTelegramTenant } from '../helpers/seed';

// A message recorded while its session's previous message finishes must hear about its turn: the
// finisher's wake list names it, or its own first execution_start finds the predecessor finished
// (migration 0046: the finish takes the session's row lock, which the record takes too). Before,
// the record could commit after the finisher read its wake list while the new message's first
// start still saw the predecessor unfinished: it waited for a wake that never came (until the
// sweeper's stale-head pass, a minute or more of silence in that chat).

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the wake of a session’s next message is never lost to a concurrent record', () => {
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

  /** Resolves 'waiting' once some backend waits for a lock `holder` (a backend pid) holds, else 'never' after 10 s. */
  const lockWait = async (holder: Promise<number>): Promise<'waiting' | 'never'> => {
    const pid = await holder;
    for (const until = Date.now() + 10_000; Date.now() < until; await sleep(20)) {
      const rows = await h.sql`
        select 1 from pg_stat_activity where pg_catalog.pg_blocking_pids(pid) @> array[${pid}::int]`;
      if (rows.length > 0) return 'waiting';
    }
    return 'never';
  };

  const paramsOf = (t: SeededTelegram, sessionId: string, externalMessageId: string): RecordMessageParams => {
    const message: InboundMessage = {
      channel: 'telegram',
      externalMessageId,
      kind: 'text',
      text: `hello ${externalMessageId}`,
      platformType: 'text',
      senderId: '4242',
      chatId: '4242',
      chatType: 'direct',
      threadId: null,
      sentAt: new Date().toISOString(),
    };
    return {
      tenantId: t.tenantId,
      bindingId: t.bindingId,
      appId: t.appId,
      sessionId,
      identity: { kind: 'direct', externalUserId: '4242', externalChatId: '4242', externalThreadId: null },
      eventId: newId('evt'),
      idempotencyKey: sha256Hex(`${t.bindingId}/${externalMessageId}`),
      workflowId: `msg-${sha256Hex(`${t.bindingId}/${externalMessageId}`)}`,
      message,
      payloadDigest: sha256Hex(`payload ${externalMessageId}`),
      requestId: `req_${externalMessageId}`,
      traceId: null,
      outcome: null,
      rateLimitRpm: null,
    };
  };

  it('a record racing the finish waits for it, and the new message then runs at once', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const sessionId = newId('ses');
    const first = paramsOf(t, sessionId, 'm-1');
    expect((await recordInboundMessage(h.apiSql, first)).kind).toBe('recorded');
    const sessionOf = async (eventId: string) =>
      (
        await h.sql<{ session_id: string }[]>`
          select session_id from message_event where tenant_id = ${t.tenantId} and event_id = ${eventId}`
      )[0]!.session_id;

    // The first message finishes in a transaction held open after its wake list was read.
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let finished!: (wake: string[]) => void;
    const wakeRead = new Promise<string[]>((r) => {
      finished = r;
    });
    let finisherPid!: (pid: number) => void;
    const finisher = new Promise<number>((r) => {
      finisherPid = r;
    });
    const finishing = h.workerSql.begin(async (tx) => {
      finisherPid((await tx<{ pid: number }[]>`select pg_catalog.pg_backend_pid() as pid`)[0]!.pid);
      const row = await messageFinish(tx as never, {
        tenantId: t.tenantId,
        eventId: first.eventId,
        failure: { outcome: 'test_failure', reason: 'ended by the test' },
        actor: 'test',
      });
      finished(row.wake);
      await held;
    });
    const wake = await Promise.race([
      wakeRead,
      finishing.then(() => Promise.reject(new Error('the finish ended before its wake list was read'))),
    ]);
    expect(wake).toEqual([]);

    // The second message of the session arrives meanwhile.
    const second = paramsOf(t, sessionId, 'm-2');
    const recording = recordInboundMessage(h.apiSql, second);
    let recordedDuringFinish: boolean;
    let startedDuringFinish: Awaited<ReturnType<typeof executionStart>> | null = null;
    try {
      recordedDuringFinish =
        (await Promise.race([recording.then(() => 'recorded'), lockWait(finisher)])) === 'recorded';
      // Were it recorded now, its first start would see the first message unfinished and wait.
      if (recordedDuringFinish)
        startedDuringFinish = await executionStart(h.workerSql, {
          tenantId: t.tenantId,
          eventId: second.eventId,
          owner: 'test',
          leaseSeconds: 60,
          workflowId: second.workflowId,
        });
    } finally {
      release();
    }
    await finishing;
    expect((await recording).kind).toBe('recorded');
    const start =
      startedDuringFinish ??
      (await executionStart(h.workerSql, {
        tenantId: t.tenantId,
        eventId: second.eventId,
        owner: 'test',
        leaseSeconds: 60,
        workflowId: second.workflowId,
      }));

    expect(await sessionOf(second.eventId)).toBe(await sessionOf(first.eventId));
    // Nobody waits for a wake the finisher never sent…
    expect(wake.includes(second.workflowId) || start.kind !== 'wait').toBe(true);
    expect(start.kind).not.toBe('wait');
    // …because the record waited for the finish's commit (the session's lock).
    expect(recordedDuringFinish).toBe(false);
  }, 60_000);

  it('a record that commits first is in the finisher’s wake list', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const sessionId = newId('ses');
    const first = paramsOf(t, sessionId, 'n-1');
    expect((await recordInboundMessage(h.apiSql, first)).kind).toBe('recorded');
    // The record's transaction holds the session row (as a batch of records does until it commits).
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const second = paramsOf(t, sessionId, 'n-2');
    let recorded!: () => void;
    const recordDone = new Promise<void>((r) => {
      recorded = r;
    });
    let recorderPid!: (pid: number) => void;
    const recorder = new Promise<number>((r) => {
      recorderPid = r;
    });
    const recording = h.apiSql.begin(async (tx) => {
      recorderPid((await tx<{ pid: number }[]>`select pg_catalog.pg_backend_pid() as pid`)[0]!.pid);
      await recordInboundMessage(tx as never, second);
      recorded();
      await held;
    });
    await Promise.race([recordDone, recording]);
    const finishing = messageFinish(h.workerSql, {
      tenantId: t.tenantId,
      eventId: first.eventId,
      failure: { outcome: 'test_failure', reason: 'ended by the test' },
      actor: 'test',
    });
    let finishedDuringRecord: boolean;
    try {
      finishedDuringRecord =
        (await Promise.race([finishing.then(() => 'finished'), lockWait(recorder)])) === 'finished';
    } finally {
      release();
    }
    await recording;
    const { wake } = await finishing;
    // The finish waited for the record's commit and then saw the new message.
    expect(finishedDuringRecord).toBe(false);
    expect(wake).toEqual([second.workflowId]);
  }, 60_000);
});
