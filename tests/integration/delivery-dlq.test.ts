import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reopenForRetry } from '../../db/queries/dlq-retry';
import { withTenantTx } from '../../db/tx';
import type { deliveryRetryWorkflow } from '../../workflows/delivery-retry';
import { deliveryRetryWorkflowId, type MessageWorkflowResult } from '../../workflows/shared';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import { api } from '../helpers/admin';
import { sealNow } from '../helpers/audit';
import {
  deadLettersOf,
  messagesOf,
  postTelegramText,
  postWecomText,
  segmentsOf,
  waitForFinished,
} from '../helpers/delivery';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';
import { waitFor } from '../helpers/wait';
import { seedWecomTenant } from '../helpers/wecom';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PART = 'The answer continues. '.repeat(120); // > half a Telegram message

// Permanent refusals on real PostgreSQL and Temporal: the segment is parked in the DLQ with its
// reason class after ONE request (no retry loop), the message fails, and an operator's retry
// delivers exactly the kept segments once and the message becomes replied.
describe('delivery DLQ: permanent refusals and the operator retry', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let wecom: FakeWecom;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    wecom = await startFakeWecom();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await wecom?.close();
  });

  const requestsTo = (chatId: number) =>
    telegram.requests.filter((r) => r.endpoint === 'sendMessage' && String(r.chatId) === String(chatId));

  const seedTwoPartReply = async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: { rules: [], default_reply: `Part one. ${PART}\n\nPart two. ${PART}` },
    });
    telegram.addBot(t.botToken);
    return t;
  };

  it('bot blocked after the first segment: parked as bot_blocked after one request; the DLQ retry sends only the kept segment, once', async () => {
    const t = await seedTwoPartReply();
    const chatId = 71_001;
    expect(await postTelegramText(h, t, chatId, 'hello')).toBe(200);
    // The user blocks the bot between the two segments (they are paced ~1 s apart).
    await waitFor(() => telegram.sentTo(chatId).length === 1, { timeoutMs: 30_000, label: 'first segment' });
    telegram.blockChat(chatId);

    const [msg] = await waitForFinished(h, t.tenantId, 1, 30_000);
    expect(msg).toMatchObject({
      status: 'failed',
      outcome: 'delivery_failed',
      failure_reason: 'bot_blocked',
    });
    const segments = await segmentsOf(h, t.tenantId);
    expect(segments.map((s) => [s.segment_index, s.status, s.last_error])).toEqual([
      [0, 'sent', null],
      [1, 'failed', 'bot_blocked'],
    ]);
    const dls = await deadLettersOf(h, t.tenantId);
    expect(dls).toHaveLength(1);
    expect(dls[0]).toMatchObject({
      kind: 'segment',
      segment_id: segments[1]!.segment_id,
      reason_class: 'bot_blocked',
      status: 'open',
      event_id: msg!.event_id,
    });
    // No retry loop: the refused segment was requested once, and stays so.
    await sleep(3000);
    expect(requestsTo(chatId).map((r) => r.status)).toEqual([200, 403]);

    // The user unblocks the bot; an operator retries the dead letter.
    telegram.unblockChat(chatId);
    const plan = await withTenantTx(h.sql, { role: 'tenant_admin_writer', tenantId: t.tenantId }, (tx) =>
      reopenForRetry(tx, {
        tenantId: t.tenantId,
        deadLetterId: dls[0]!.dead_letter_id,
        actor: 'test-operator',
        reason: 'user unblocked the bot',
        workflowId: deliveryRetryWorkflowId(t.tenantId, dls[0]!.dead_letter_id),
      }),
    );
    expect(plan).toEqual({ eventId: msg!.event_id, segmentIds: [segments[1]!.segment_id] });
    if (typeof plan === 'string' || 'kind' in plan) throw new Error(JSON.stringify(plan));
    const handle = await h.temporal.workflow.start<typeof deliveryRetryWorkflow>('deliveryRetryWorkflow', {
      workflowId: deliveryRetryWorkflowId(t.tenantId, dls[0]!.dead_letter_id),
      taskQueue: h.taskQueue,
      args: [
        {
          tenantId: t.tenantId,
          eventId: plan.eventId,
          segmentIds: plan.segmentIds,
          deadLetterId: dls[0]!.dead_letter_id,
        },
      ],
    });
    expect(await handle.result()).toMatchObject({ status: 'replied', segmentsSent: 1 });

    // Each segment reached the user exactly once, in order.
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(segments.map((s) => s.content));
    const [after] = await messagesOf(h, t.tenantId);
    expect(after).toMatchObject({ status: 'replied', failure_reason: null });
    expect((await segmentsOf(h, t.tenantId)).map((s) => s.status)).toEqual(['sent', 'sent']);
    expect((await deadLettersOf(h, t.tenantId))[0]).toMatchObject({ status: 'retried' });
    // A second retry of the same dead letter is refused: it is no longer open.
    const again = await withTenantTx(h.sql, { role: 'tenant_admin_writer', tenantId: t.tenantId }, (tx) =>
      reopenForRetry(tx, {
        tenantId: t.tenantId,
        deadLetterId: dls[0]!.dead_letter_id,
        actor: 'x',
        reason: null,
        workflowId: deliveryRetryWorkflowId(t.tenantId, dls[0]!.dead_letter_id),
      }),
    );
    expect(again).toBe('invalid_transition');
  }, 90_000);

  it('the admin retry route reopens the dead letter and its delivery run replies (bot blocked, then unblocked)', async () => {
    const t = await seedTwoPartReply();
    const chatId = 71_002;
    telegram.blockChat(chatId);
    expect(await postTelegramText(h, t, chatId, 'hello')).toBe(200);
    const [msg] = await waitForFinished(h, t.tenantId, 1, 30_000);
    expect(msg).toMatchObject({ status: 'failed', failure_reason: 'bot_blocked' });
    const [dl] = await deadLettersOf(h, t.tenantId);
    expect(dl).toMatchObject({ kind: 'segment', reason_class: 'bot_blocked', status: 'open' });
    expect(requestsTo(chatId)).toHaveLength(1);

    telegram.unblockChat(chatId);
    const path = `/v1/admin/tenants/${t.tenantId}/dead-letters/${dl!.dead_letter_id}/retry`;
    const res = await api(h.app, 'POST', path, { token: TEST_ADMIN_TOKEN, body: { reason: 'unblocked' } });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ dead_letter_id: dl!.dead_letter_id, status: 'retried' });
    const result: MessageWorkflowResult = await h.temporal.workflow
      .getHandle(res.body.retry_workflow_id as string)
      .result();
    expect(result).toMatchObject({ status: 'replied', segmentsSent: 2 });
    const segments = await segmentsOf(h, t.tenantId);
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(segments.map((s) => s.content));
    expect((await messagesOf(h, t.tenantId))[0]).toMatchObject({ status: 'replied' });
    // Retrying it again is an invalid transition, and sends nothing more.
    const again = await api(h.app, 'POST', path, { token: TEST_ADMIN_TOKEN, body: {} });
    expect(again.status, again.text).toBe(409);
    await sleep(1500);
    expect(telegram.sentTo(chatId)).toHaveLength(2);
  }, 90_000);

  it('WeCom invalid user (81013): parked as invalid_user after one request, message failed', async () => {
    const w = await seedWecomTenant(h.sql, h.secrets, {
      apiBaseUrl: wecom.url,
      scripted: { rules: [], default_reply: '收到：{{text}}' },
    });
    wecom.addApp({ corpId: w.corpId, corpSecret: w.corpSecret, agentId: w.agentId });
    wecom.invalidUser('departed_user');
    expect(await postWecomText(h, w, 'departed_user', '你好')).toBe(200);

    const [msg] = await waitForFinished(h, w.tenantId, 1, 30_000);
    expect(msg).toMatchObject({
      status: 'failed',
      outcome: 'delivery_failed',
      failure_reason: 'invalid_user',
    });
    const [seg] = await segmentsOf(h, w.tenantId);
    expect(seg).toMatchObject({ status: 'failed', last_error: 'invalid_user', attempts: 1 });
    const dls = await deadLettersOf(h, w.tenantId);
    expect(dls).toHaveLength(1);
    expect(dls[0]).toMatchObject({
      kind: 'segment',
      segment_id: seg!.segment_id,
      reason_class: 'invalid_user',
    });
    await sleep(3000);
    const sends = wecom.requests.filter(
      (r) => r.endpoint === 'message/send' && r.corpId === w.corpId && r.body?.touser === 'departed_user',
    );
    expect(sends.map((r) => r.errcode)).toEqual([81013]);
    expect(wecom.deliveredTo('departed_user')).toHaveLength(0);
  }, 60_000);

  it('a reply that is blank after trimming sends nothing and is recorded as replied with outcome empty_reply', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: { rules: [], default_reply: '   ' },
    });
    telegram.addBot(t.botToken);
    const chatId = 71_003;
    expect(await postTelegramText(h, t, chatId, 'say nothing')).toBe(200);
    const [msg] = await waitForFinished(h, t.tenantId, 1, 30_000);
    expect(msg).toMatchObject({ status: 'replied', outcome: 'empty_reply', segment_count: 0 });
    expect(await h.temporal.workflow.getHandle(msg!.workflow_id).result()).toMatchObject({
      status: 'replied',
      segmentsSent: 0,
    });
    expect(await segmentsOf(h, t.tenantId)).toEqual([]);
    expect(await deadLettersOf(h, t.tenantId)).toEqual([]);
    expect(requestsTo(chatId)).toEqual([]);
    // Finished like any other reply: one audit entry for the terminal transition.
    await sealNow(h.sql, t.tenantId);
    const finished = await h.sql<{ decision: string; reason: string }[]>`
      select decision, reason from audit_log where tenant_id = ${t.tenantId} and action = 'message.finished'`;
    expect(finished).toEqual([{ decision: 'replied', reason: 'empty_reply' }]);
  }, 60_000);
});
