import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../activities';
import { segmentClaim, segmentRecord } from '../../db/queries/steps';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// The worker's one-statement steps (migration 0015) where they differ from a plain port of the
// transactions they replaced: the receipt of a sent segment outlives a failed finish, and the
// session summary is extended turn by turn.
describe('execution step functions', () => {
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

  const post = (t: { routeKey: string; webhookSecret: string }, update: unknown) =>
    h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
      body: JSON.stringify(update),
    });

  /**
   * A tenant with one recorded message and the worker's activities to drive it by hand (no worker
   * polls this harness's queue). `paceFor`: the chat's next send slot is that far away.
   */
  async function recordedMessage(
    chatId: number,
    text: string,
    opts: { bot?: boolean; paceFor?: string } = {},
  ) {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    if (opts.bot) telegram.addBot(t.botToken);
    expect((await post(t, telegramTextUpdate({ chatId, text }))).status).toBe(200);
    const [event] = await h.sql<{ event_id: string }[]>`
      select event_id from message_event where tenant_id = ${t.tenantId}`;
    if (opts.paceFor)
      await h.sql`insert into chat_pacing (tenant_id, binding_id, chat_id, next_allowed_at)
                  values (${t.tenantId}, ${t.bindingId}, ${String(chatId)}, now() + ${opts.paceFor}::interval)`;
    const activities = createActivities({
      sql: h.sql,
      secrets: h.secrets,
      log: h.appDeps.log,
      suspendedReply: 'unused',
      workerId: 'step-probe',
      sendTimeoutMs: 1000,
    });
    const eventId = event!.event_id;
    const input = { tenantId: t.tenantId, eventId, channel: 'telegram' as const };
    return { t, eventId, activities, input };
  }

  it('a sent segment stays sent when finishing the message with it fails (the workflow finishes later)', async () => {
    // The chat is paced, so startExecution's own quick send declines and the claim is ours to make.
    const { t, eventId, activities, input } = await recordedMessage(5151, 'receipt', {
      paceFor: '2 seconds',
    });
    const started = await activities.startExecution(input);
    if (started.kind !== 'committed') throw new Error(`expected a committed reply, got ${started.kind}`);
    expect(started.firstSend).toBeNull();
    const [segmentId] = started.reply.segmentIds;
    const claim = await segmentClaim(h.sql, {
      tenantId: t.tenantId,
      segmentId: segmentId!,
      owner: 'step-probe/1',
      leaseSeconds: 60,
      intervalsMs: {},
      maxWaitMs: null,
    });
    expect(claim).toMatchObject({ claimed: true, status: 'sending' });

    // Another transaction holds the message's row (message_finish locks it; the audit entry no
    // longer waits for the tenant's chain, migration 0030); this connection gives up waiting for it.
    const holder = postgres(inject('databaseUrl'), { max: 1, onnotice: () => undefined });
    const impatient = postgres(inject('databaseUrl'), { max: 1, onnotice: () => undefined });
    try {
      let release!: () => void;
      const released = new Promise<void>((r) => {
        release = r;
      });
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => {
        locked = r;
      });
      const holding = holder.begin(async (tx) => {
        await tx`select 1 from message_event where tenant_id = ${t.tenantId} and event_id = ${eventId} for update`;
        locked();
        await released;
      });
      await isLocked;
      await impatient`set lock_timeout = '300ms'`;
      const recorded = await segmentRecord(impatient, {
        tenantId: t.tenantId,
        segmentId: segmentId!,
        fencingToken: claim!.fencing_token,
        outcome: { status: 'sent', providerMessageId: '777' },
        finish: true,
        actor: 'step-probe/1',
      });
      release();
      await holding;
      expect(recorded).toEqual({ ok: true, finished: null });
    } finally {
      await holder.end();
      await impatient.end();
    }
    const [segment] = await h.sql<{ status: string; provider_message_id: string | null }[]>`
      select status, provider_message_id from reply_outbox where tenant_id = ${t.tenantId} and segment_id = ${segmentId!}`;
    expect(segment).toEqual({ status: 'sent', provider_message_id: '777' });
    const status = async () =>
      (
        await h.sql<{ status: string }[]>`
          select status from message_event where tenant_id = ${t.tenantId} and event_id = ${eventId}`
      )[0]!.status;
    expect(await status()).toBe('reply_pending');

    // What the workflow does when the receipt did not finish the message.
    const done = await activities.finishMessage({ tenantId: t.tenantId, eventId: eventId });
    expect(done.status).toBe('replied');
    expect(await status()).toBe('replied');
  });

  it('a claim that would wait longer than its caller accepts takes nothing and reserves no slot', async () => {
    // The chat's next slot is 5 s away (an earlier send to it, or a provider penalty).
    const { t, activities, input } = await recordedMessage(5252, 'paced', { paceFor: '5 seconds' });
    const slot = async () =>
      (
        await h.sql<{ next_allowed_at: Date }[]>`
          select next_allowed_at from chat_pacing where tenant_id = ${t.tenantId} and chat_id = '5252'`
      )[0]!.next_allowed_at.getTime();
    const before = await slot();
    // The quick send made by the activity that commits the reply declines it like any quick claim.
    const started = await activities.startExecution(input);
    if (started.kind !== 'committed') throw new Error(`expected a committed reply, got ${started.kind}`);
    expect(started.firstSend).toBeNull();
    expect(await slot()).toBe(before);
    const segmentId = started.reply.segmentIds[0]!;
    const claim = (maxWaitMs: number | null) =>
      segmentClaim(h.sql, {
        tenantId: t.tenantId,
        segmentId,
        owner: 'step-probe/2',
        leaseSeconds: 60,
        intervalsMs: { 'telegram/direct': 1100 },
        maxWaitMs,
      });

    const declined = await claim(250);
    expect(declined).toMatchObject({ claimed: false, status: 'pending', ciphertext: null });
    expect(declined!.wait_ms).toBeGreaterThan(4000);
    expect(await slot()).toBe(before);

    const taken = await claim(null);
    expect(taken).toMatchObject({ claimed: true, status: 'sending' });
    expect(taken!.wait_ms).toBeGreaterThan(4000);
    expect(await slot()).toBe(before + 1100);
  });

  it("a scripted reply's only segment is sent, and the message finished, by the activity that commits it", async () => {
    const { t, eventId, activities, input } = await recordedMessage(5353, 'at once', { bot: true });
    const started = await activities.startExecution(input);
    if (started.kind !== 'committed') throw new Error(`expected a committed reply, got ${started.kind}`);
    expect(started.reply.segmentIds).toHaveLength(1);
    expect(started.firstSend).toMatchObject({ status: 'sent', finished: { status: 'replied' } });
    expect(telegram.sentTo('5353').map((m) => m.text)).toEqual(['You said: at once']);
    const [row] = await h.sql<{ status: string }[]>`
      select status from message_event where tenant_id = ${t.tenantId} and event_id = ${eventId}`;
    expect(row!.status).toBe('replied');

    // Run again (a retried local activity): the pinned reply, its segment already sent, nothing resent.
    const again = await activities.startExecution(input);
    expect(again.kind).toBe('finished');
    expect(telegram.sentTo('5353')).toHaveLength(1);
  });

  it('the session summary grows by each replied turn, user then assistant, oldest first', async () => {
    const worker = await h.startWorker();
    try {
      const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
      telegram.addBot(t.botToken);
      for (const [i, text] of ['first   question', 'second\nquestion'].entries()) {
        expect((await post(t, telegramTextUpdate({ chatId: 6161, text }))).status).toBe(200);
        await waitFor(() => telegram.sentTo('6161').length === i + 1, { timeoutMs: 30_000 });
      }
      await waitFor(async () => {
        const rows =
          await h.sql`select 1 from message_event where tenant_id = ${t.tenantId} and status = 'replied'`;
        return rows.length === 2;
      });
      const [summary] = await h.sql<{ content: string; base_event_seq: number }[]>`
        select content, base_event_seq from session_summary where tenant_id = ${t.tenantId}`;
      expect(summary).toEqual({
        base_event_seq: 2,
        content: [
          'user: first question',
          'assistant: You said: first question',
          'user: second question',
          'assistant: You said: second question',
        ].join('\n'),
      });
    } finally {
      await worker.stop();
    }
  });
});
