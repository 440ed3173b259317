import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { sealNow } from '../helpers/audit';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// Walking skeleton: one verified Telegram update → one durable workflow → one reply at the
// (fake) Bot API, on real PostgreSQL and a real Temporal dev server.
describe('Telegram webhook → workflow → reply', () => {
  let h: Harness;
  let telegram: FakeTelegram;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
  });

  const post = (routeKey: string, body: unknown, secret?: string) =>
    h.app.request(`/v1/webhooks/telegram/${routeKey}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(secret === undefined ? {} : { 'x-telegram-bot-api-secret-token': secret }),
      },
      body: JSON.stringify(body),
    });

  it('the same update posted three times concurrently gives one row, one workflow and one reply', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    telegram.addBot(t.botToken);
    const update = telegramTextUpdate({ chatId: 4242, text: '  hello switchyard  ' });

    const responses = await Promise.all([1, 2, 3].map(() => post(t.routeKey, update, t.webhookSecret)));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(await responses[0]!.json()).toEqual({});

    const rows = await h.sql<{ event_id: string; workflow_id: string; event_seq: number }[]>`
      select event_id, workflow_id, event_seq from message_event where tenant_id = ${t.tenantId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.event_seq).toBe(1);

    await telegram.waitForSent(1, 30_000);
    const handle = h.temporal.workflow.getHandle(rows[0]!.workflow_id);
    const result = await handle.result();
    expect(result).toMatchObject({ status: 'replied', segmentsSent: 1 });

    // A late re-delivery after the reply is still a duplicate: nothing new is recorded or sent.
    expect((await post(t.routeKey, update, t.webhookSecret)).status).toBe(200);
    const executions = [];
    for await (const wf of h.temporal.workflow.list({ query: `WorkflowId = '${rows[0]!.workflow_id}'` }))
      executions.push(wf);
    expect(executions).toHaveLength(1);
    expect(telegram.sentTo('4242').map((m) => m.text)).toEqual(['You said: hello switchyard']);

    const [msg] = await h.sql<
      { status: string }[]
    >`select status from message_event where event_id = ${rows[0]!.event_id}`;
    expect(msg!.status).toBe('replied');
    const desc = await handle.describe();
    expect(desc.searchAttributes.SwitchyardTenantId).toEqual([t.tenantId]);
    expect(desc.searchAttributes.SwitchyardMessageStatus).toEqual(['replied']);
  });

  it('a wrong or missing secret token gets the fixed 401 and records no message', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
    const update = telegramTextUpdate({ chatId: 77, text: 'let me in' });

    const wrong = await post(t.routeKey, update, `${t.webhookSecret}x`);
    const missing = await post(t.routeKey, update);
    const unknownRoute = await post('A'.repeat(22), update, t.webhookSecret);
    for (const res of [wrong, missing, unknownRoute]) {
      expect(res.status).toBe(401);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('unauthenticated');
      expect(body.error.message).toBe('Request could not be verified.');
    }
    const rows = await h.sql`select 1 from message_event where tenant_id = ${t.tenantId}`;
    expect(rows).toHaveLength(0);
    const sessions = await h.sql`select 1 from session where tenant_id = ${t.tenantId}`;
    expect(sessions).toHaveLength(0);
    await waitFor(async () => {
      const events = await h.sql`select failure_class from ingress_security_event
        where request_id in (${wrong.headers.get('x-request-id')!}, ${missing.headers.get('x-request-id')!})`;
      return events.length === 2;
    });
  });
});

describe('terminal transition is idempotent', () => {
  it('finishMessage run again after the commit (a local activity retried) changes nothing and audits once', async () => {
    const h = await createHarness();
    const telegram = await startFakeTelegram();
    try {
      await h.startWorker();
      const t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: telegram.url });
      telegram.addBot(t.botToken);
      const res = await h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': t.webhookSecret },
        body: JSON.stringify(telegramTextUpdate({ chatId: 4343, text: 'once' })),
      });
      expect(res.status).toBe(200);
      const [row] = await h.sql<{ event_id: string; workflow_id: string }[]>`
        select event_id, workflow_id from message_event where tenant_id = ${t.tenantId}`;
      await h.temporal.workflow.getHandle(row!.workflow_id).result();
      const finished = async () => {
        await sealNow(h.sql, t.tenantId);
        return h.sql`select 1 from audit_log where tenant_id = ${t.tenantId} and action = 'message.finished'`;
      };
      expect(await finished()).toHaveLength(1);

      const activities = createActivities({
        sql: h.sql,
        secrets: h.secrets,
        log: h.appDeps.log,
        suspendedReply: 'unused',
        workerId: 'retry-probe',
        sendTimeoutMs: 1000,
      });
      const again = await activities.finishMessage({ tenantId: t.tenantId, eventId: row!.event_id });
      expect(again.status).toBe('replied');
      expect(await finished()).toHaveLength(1);
      expect(telegram.sentTo('4343')).toHaveLength(1);
    } finally {
      await h.close();
      await telegram.close();
    }
  });
});
