import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordInboundMessage } from '../../db/queries/ingress';
import { operatorFail, wakeListOf } from '../../db/queries/repair';
import { executionStart, messageFinish } from '../../db/queries/steps';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { createHarness, type Harness } from '../helpers/harness';
import { holdLock } from '../helpers/hold-lock';
import { recordParamsOf } from '../helpers/record-params';
import { seedTelegramTenant } from '../helpers/seed';

// A message recorded while its session's previous message finishes must hear about its turn: the
// finisher's wake list names it, or its own first execution_start finds the predecessor finished
// (migration 0046: the finish takes the session's row lock, which the record takes too). Before,
// the record could commit after the finisher read its wake list while the new message's first
// start still saw the predecessor unfinished: it waited for a wake that never came (until the
// sweeper's stale-head pass, a minute or more of silence in that chat). An operator's fail
// (tenant_admin_writer, which may not lock sessions itself) takes the same lock (migration 0048).

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

  /** Resolves 'waiting' once some backend waits for a lock the backend `pid` holds, else 'never' after 10 s. */
  const lockWait = async (pid: number): Promise<'waiting' | 'never'> => {
    for (const until = Date.now() + 10_000; Date.now() < until; await sleep(20)) {
      const rows = await h.sql`
        select 1 from pg_stat_activity where pg_catalog.pg_blocking_pids(pid) @> array[${pid}::int]`;
      if (rows.length > 0) return 'waiting';
    }
    return 'never';
  };

  /** A recorded message's first execution_start, as its workflow's first task runs it. */
  const firstStart = (tenantId: string, m: { eventId: string; workflowId: string }) =>
    executionStart(h.workerSql, {
      tenantId,
      eventId: m.eventId,
      owner: 'test',
      leaseSeconds: 60,
      workflowId: m.workflowId,
    });

  it('a record racing the finish waits for it, and the new message then runs at once', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const first = recordParamsOf(t, '4242', 'm-1');
    expect((await recordInboundMessage(h.apiSql, first)).kind).toBe('recorded');
    const sessionOf = async (eventId: string) =>
      (
        await h.sql<{ session_id: string }[]>`
          select session_id from message_event where tenant_id = ${t.tenantId} and event_id = ${eventId}`
      )[0]!.session_id;

    // The first message finishes in a transaction held open after its wake list was read.
    const finishing = await holdLock(h.workerSql, (tx) =>
      messageFinish(tx as never, {
        tenantId: t.tenantId,
        eventId: first.eventId,
        failure: { outcome: 'test_failure', reason: 'ended by the test' },
        actor: 'test',
      }),
    );
    // Read before the second message existed: it cannot name it.
    const { wake } = finishing.value;

    // The second message of the session arrives meanwhile.
    const second = recordParamsOf(t, '4242', 'm-2');
    const recording = recordInboundMessage(h.apiSql, second);
    const startSecond = () => firstStart(t.tenantId, second);
    let recordedDuringFinish: boolean;
    let startedDuringFinish: Awaited<ReturnType<typeof executionStart>> | null = null;
    try {
      recordedDuringFinish =
        (await Promise.race([recording.then(() => 'recorded'), lockWait(finishing.pid)])) === 'recorded';
      // Were it recorded now, its first start would see the first message unfinished and wait.
      if (recordedDuringFinish) startedDuringFinish = await startSecond();
    } finally {
      await finishing.release();
    }
    expect((await recording).kind).toBe('recorded');
    const start = startedDuringFinish ?? (await startSecond());

    expect(wake).toEqual([]);
    expect(await sessionOf(second.eventId)).toBe(await sessionOf(first.eventId));
    // Nobody waits for a wake the finisher never sent…
    expect(wake.includes(second.workflowId) || start.kind !== 'wait').toBe(true);
    expect(start.kind).not.toBe('wait');
    // …because the record waited for the finish's commit (the session's lock).
    expect(recordedDuringFinish).toBe(false);
  }, 60_000);

  it('a record that commits first is in the finisher’s wake list', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const first = recordParamsOf(t, '4242', 'n-1');
    expect((await recordInboundMessage(h.apiSql, first)).kind).toBe('recorded');
    // The record's transaction holds the session row (as a batch of records does until it commits).
    const second = recordParamsOf(t, '4242', 'n-2');
    const recording = await holdLock(h.apiSql, (tx) => recordInboundMessage(tx as never, second));
    const finishing = messageFinish(h.workerSql, {
      tenantId: t.tenantId,
      eventId: first.eventId,
      failure: { outcome: 'test_failure', reason: 'ended by the test' },
      actor: 'test',
    });
    let finishedDuringRecord: boolean;
    try {
      finishedDuringRecord =
        (await Promise.race([finishing.then(() => 'finished'), lockWait(recording.pid)])) === 'finished';
    } finally {
      await recording.release();
    }
    const { wake } = await finishing;
    // The finish waited for the record's commit and then saw the new message.
    expect(finishedDuringRecord).toBe(false);
    expect(wake).toEqual([second.workflowId]);
  }, 60_000);

  it('an operator’s fail takes the session lock too: a racing record waits for its commit', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const first = recordParamsOf(t, '4242', 'o-1');
    expect((await recordInboundMessage(h.apiSql, first)).kind).toBe('recorded');
    // POST …/messages/{id}/fail's transaction (api/admin/message-actions.ts), held open after it
    // read whom to wake.
    const failing = await holdLock(h.apiSql, async (tx) => {
      await tx`select set_config('role', 'tenant_admin_writer', true), set_config('app.tenant_id', ${t.tenantId}, true)`;
      expect(await operatorFail(tx, { tenantId: t.tenantId, eventId: first.eventId, reason: 'test' })).toBe(
        'received',
      );
      return wakeListOf(tx, t.tenantId, first.eventId);
    });
    const second = recordParamsOf(t, '4242', 'o-2');
    const recording = recordInboundMessage(h.apiSql, second);
    let recordedDuringFail: boolean;
    try {
      recordedDuringFail =
        (await Promise.race([recording.then(() => 'recorded'), lockWait(failing.pid)])) === 'recorded';
    } finally {
      await failing.release();
    }
    expect((await recording).kind).toBe('recorded');
    expect(failing.value).toEqual([]);
    expect(recordedDuringFail).toBe(false);
    // Recorded after the fail committed, the message's first start finds its turn.
    const start = await firstStart(t.tenantId, second);
    expect(start.kind).not.toBe('wait');
  }, 60_000);
});
