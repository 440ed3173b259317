import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordAndStart } from '../../api/ingress/record';
import { consoleInboundMessage } from '../../channels/console/inbound';
import { newId } from '../../db/ids';
import {
  type AdminTenant,
  api,
  configurationOf,
  type Json,
  ok,
  setupTwoTenants,
  tenantPath,
} from '../helpers/admin';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

// The built-in console channel: a console binding needs no secret and no proof; an operator's
// message runs the same recording, workflow, session lane and outbox as a webhook's, its reply is
// "sent" by being recorded, and the conversation is read back by polling with a cursor.
describe('console channel', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;
  let bindingId: string;
  let workerStarted = false;

  beforeAll(async () => {
    h = await createHarness();
    ({ a, b } = await setupTwoTenants(h.app));
    const binding = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        token: a.adminKey,
        body: { channel: 'console', app_id: a.appId, activate: true },
      }),
      201,
    );
    bindingId = binding.binding_id;
  });
  afterAll(async () => {
    await h?.close();
  });

  const messagesPath = (tenantId: string, binding: string, query = '') =>
    tenantPath(tenantId, `/bindings/${binding}/console/messages${query}`);
  const send = (body: Json, token = a.adminKey, binding = bindingId, tenantId = a.tenantId) =>
    api(h.app, 'POST', messagesPath(tenantId, binding), { token, body });
  const read = (conversation: string, after?: string, token = a.viewerKey) =>
    api(
      h.app,
      'GET',
      messagesPath(
        a.tenantId,
        bindingId,
        `?conversation_id=${conversation}${after ? `&after=${after}` : ''}`,
      ),
      {
        token,
      },
    );
  /**
   * Polls the conversation from `after` until `done(items)` holds for what arrived; returns them and
   * the cursor. A number `n` means: until `n` replies arrived.
   */
  async function pollFor(
    conversation: string,
    after: string | undefined,
    done: number | ((items: Json[]) => boolean),
  ) {
    const until =
      typeof done === 'number'
        ? (items: Json[]) => items.filter((i) => i.kind === 'reply').length >= done
        : done;
    const items: Json[] = [];
    let cursor = after;
    await waitFor(
      async () => {
        const page = await ok(read(conversation, cursor));
        items.push(...page.items);
        cursor = page.next_cursor;
        expect(typeof cursor).toBe('string');
        return until(items);
      },
      { timeoutMs: 30_000, label: `console items of ${conversation}` },
    );
    return { items, cursor: cursor as string };
  }
  /** The last copy of each item (a user message comes again when its status changed), in first-seen order. */
  const latest = (items: Json[]) => {
    const byKey = new Map<string, Json>();
    for (const i of items) byKey.set(`${i.kind}:${i.event_id}:${i.segment_index}`, i);
    return [...byKey.values()];
  };
  const repliesOf = (items: Json[]) => items.filter((i) => i.kind === 'reply');

  it('creates a console binding with no secret, account = its own id, and no webhook', async () => {
    const row = await ok(
      api(h.app, 'GET', tenantPath(a.tenantId, `/bindings/${bindingId}`), { token: a.viewerKey }),
    );
    expect(row).toMatchObject({
      channel: 'console',
      status: 'active',
      secret_ref: null,
      provider_account_id: bindingId,
      config: {},
    });
    const created = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        token: a.adminKey,
        body: { channel: 'console', app_id: a.appId },
      }),
      201,
    );
    expect(created).toMatchObject({ status: 'draft', route_key: null, webhook_path: null });
    const [audit] = await h.sql`
      select channel, binding_id from audit_log
      where tenant_id = ${a.tenantId} and action = 'binding.create' and binding_id = ${bindingId}`;
    expect(audit).toMatchObject({ channel: 'console' });
  });

  it('refuses a secret_ref or provider account on a console binding, and still requires one elsewhere', async () => {
    const post = (body: Json) =>
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), { token: a.adminKey, body });
    for (const extra of [{ secret_ref: a.secretRef }, { provider_account_id: '42' }, { config: {} }]) {
      const res = await post({ channel: 'console', app_id: a.appId, ...extra });
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    const telegram = await post({ channel: 'telegram', provider_account_id: '123456', app_id: a.appId });
    expect(telegram.status).toBe(400);
  });

  it('a reply sent after its user message was read still comes after the cursor', async () => {
    // No worker yet: the message is recorded and waits, so the first read sees it unanswered.
    const accepted = await ok(
      send({ conversation_id: 'late', text: 'hello console', client_message_id: 'm1' }),
      202,
    );
    expect(accepted).toMatchObject({ status: 'received', duplicate: false });
    const first = await ok(read('late'));
    expect(first.items).toEqual([
      expect.objectContaining({
        kind: 'user',
        event_id: accepted.event_id,
        segment_index: null,
        text: 'hello console',
      }),
    ]);
    await h.startWorker();
    workerStarted = true;
    const { items, cursor } = await pollFor('late', first.next_cursor, 1);
    expect(repliesOf(items)).toEqual([
      expect.objectContaining({
        kind: 'reply',
        event_id: accepted.event_id,
        segment_index: 0,
        text: 'You said: hello console',
        status: 'sent',
      }),
    ]);
    // The user message read as `received` comes again with its later status, never as a new one.
    expect(latest(items.filter((i) => i.kind === 'user'))).toEqual([
      expect.objectContaining({ event_id: accepted.event_id, status: 'replied', text: 'hello console' }),
    ]);
    expect((await ok(read('late', cursor))).items).toEqual([]);

    // Delivered through the outbox with the console's receipt, and the message finished.
    const [seg] =
      await h.sql`select status, provider_message_id, channel from reply_outbox where event_id = ${accepted.event_id}`;
    expect(seg).toMatchObject({ status: 'sent', channel: 'console' });
    expect(seg!.provider_message_id).toMatch(/^console:seg_/);
    const [msg] = await h.sql`select status from message_event where event_id = ${accepted.event_id}`;
    expect(msg!.status).toBe('replied');

    // A second message in the same conversation: only it and its reply are new.
    const next = await ok(send({ conversation_id: 'late', text: 'again' }), 202);
    const more = await pollFor('late', cursor, 1);
    expect(latest(more.items).map((i: Json) => [i.kind, i.event_id, i.text])).toEqual([
      ['user', next.event_id, 'again'],
      ['reply', next.event_id, 'You said: again'],
    ]);
    // The whole conversation from the start, in order; another conversation is its own lane.
    const all = await ok(read('late'));
    expect(all.items.map((i: Json) => i.kind)).toEqual(['user', 'reply', 'user', 'reply']);
    expect((await ok(read('other'))).items).toEqual([]);
  });

  it('the same client_message_id is one message, answered once', async () => {
    expect(workerStarted).toBe(true);
    const body = { conversation_id: 'dup', text: 'only once', client_message_id: 'same-id' };
    const [x, y] = await Promise.all([ok(send(body), 202), ok(send(body), 202)]);
    expect(x.event_id).toBe(y.event_id);
    expect([x.duplicate, y.duplicate].sort()).toEqual([false, true]);
    const { items } = await pollFor('dup', undefined, 1);
    const again = await ok(send(body), 202);
    expect(again).toMatchObject({ event_id: x.event_id, duplicate: true });
    const rows =
      await h.sql`select 1 from message_event where tenant_id = ${a.tenantId} and event_id = ${x.event_id}`;
    expect(rows).toHaveLength(1);
    const [{ n }] =
      (await h.sql`select count(*)::int as n from reply_outbox where event_id = ${x.event_id}`) as Json;
    expect(n).toBe(1);
    expect(latest(items).map((i: Json) => i.kind)).toEqual(['user', 'reply']);
    const audits = await h.sql`
      select actor_id, user_id from audit_log
      where tenant_id = ${a.tenantId} and action = 'console.message' and details ->> 'event_id' = ${x.event_id}`;
    expect(audits).toEqual([{ actor_id: a.adminKeyId, user_id: `console:${a.adminKeyId}` }]);
    // The platform token may send too.
    await ok(send({ conversation_id: 'dup', text: 'from the platform' }, TEST_ADMIN_TOKEN), 202);
  });

  it('a console message is audited once, whatever the retries, also when its first audit was lost', async () => {
    const audits = (eventId: string) => h.sql`
      select details from audit_log
      where tenant_id = ${a.tenantId} and action = 'console.message' and details ->> 'event_id' = ${eventId}`;
    // As if the API process died between the record and its audit: recorded, never audited.
    const lost = await recordAndStart(
      h.appDeps,
      {
        tenantId: a.tenantId,
        bindingId,
        appId: a.appId,
        channel: 'console',
        bindingConfig: {},
        tenantStatus: 'active',
        rateLimitRpm: null,
        traceSamplingRate: 0,
        logMaskingLevel: 'none',
      },
      consoleInboundMessage({
        conversationId: 'audit',
        senderId: `console:${a.adminKeyId}`,
        text: 'audit me',
        clientMessageId: 'aud-1',
        generatedId: 'unused',
        sentAt: new Date(),
      }),
      { requestId: 'req_console_test', traceId: null },
    );
    expect(await audits(lost.kind === 'not_routed' ? '' : lost.eventId)).toHaveLength(0);
    const body = { conversation_id: 'audit', text: 'audit me', client_message_id: 'aud-1' };
    const [x, y] = await Promise.all([ok(send(body), 202), ok(send(body), 202)]);
    expect([x.duplicate, y.duplicate]).toEqual([true, true]);
    expect(await audits(x.event_id)).toHaveLength(1);
    await ok(send(body), 202);
    expect(await audits(x.event_id)).toHaveLength(1);

    // A rate-limited send is recorded as failed, answered 429, and audited as such.
    const setRpm = async (rpm: number | null) => {
      const t = await ok(api(h.app, 'GET', tenantPath(a.tenantId)));
      await ok(
        api(h.app, 'PUT', tenantPath(a.tenantId, '/configuration'), {
          body: configurationOf(t, { rate_limit_rpm: rpm }),
        }),
      );
    };
    await setRpm(0);
    try {
      const limited = await send({ conversation_id: 'audit', text: 'too many', client_message_id: 'aud-2' });
      expect(limited.status, limited.text).toBe(429);
      const eventId = limited.body.error.details.event_id;
      expect(await audits(eventId)).toEqual([
        { details: expect.objectContaining({ outcome: 'rate_limited' }) },
      ]);
    } finally {
      await setRpm(null);
    }
  });

  it('a failed message reopened by a dead-letter retry is delivered to a reader that read past it', async () => {
    expect(workerStarted).toBe(true);
    // M1 replies, then its delivery is rewound to a permanent failure with an open segment letter
    // (what a refused send leaves): the message failed, its one segment never sent.
    const m1 = await ok(send({ conversation_id: 'reopen', text: 'first' }), 202);
    await pollFor('reopen', undefined, 1);
    const [seg] = await h.sql<{ segment_id: string }[]>`
      select segment_id from reply_outbox where tenant_id = ${a.tenantId} and event_id = ${m1.event_id}`;
    const deadLetterId = newId('dl');
    await h.sql.begin(async (tx) => {
      await tx`update reply_outbox set status = 'failed', sent_at = null, sent_seq = null,
               provider_message_id = null, last_error = 'refused'
               where tenant_id = ${a.tenantId} and segment_id = ${seg!.segment_id}`;
      await tx`update message_event set status = 'failed', outcome = 'delivery_failed'
               where tenant_id = ${a.tenantId} and event_id = ${m1.event_id}`;
      await tx`insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, segment_id, reason_class)
               values (${a.tenantId}, ${deadLetterId}, ${m1.event_id}, 'segment', ${seg!.segment_id}, 'permanent')`;
    });
    // The reader sees M1 failed with no reply, then M2 and its reply: its cursor is past both.
    const seen = await ok(read('reopen'));
    expect(seen.items).toEqual([
      expect.objectContaining({ kind: 'user', event_id: m1.event_id, status: 'failed' }),
    ]);
    const m2 = await ok(send({ conversation_id: 'reopen', text: 'second' }), 202);
    const past = await pollFor('reopen', seen.next_cursor, (items) =>
      latest(items).some((i) => i.kind === 'user' && i.event_id === m2.event_id && i.status === 'replied'),
    );
    expect(repliesOf(past.items).map((i: Json) => i.event_id)).toEqual([m2.event_id]);

    await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, `/dead-letters/${deadLetterId}/retry`), {
        token: a.adminKey,
        body: { reason: 'console test' },
      }),
      202,
    );
    const later = await pollFor('reopen', past.cursor, 1);
    expect(repliesOf(later.items)).toEqual([
      expect.objectContaining({ event_id: m1.event_id, segment_index: 0, text: 'You said: first' }),
    ]);
    // M1's bubble learns its new status on the same polls.
    await waitFor(
      async () => {
        const page = await ok(read('reopen', later.cursor));
        later.items.push(...page.items);
        later.cursor = page.next_cursor;
        return latest(later.items).some(
          (i) => i.kind === 'user' && i.event_id === m1.event_id && i.status === 'replied',
        );
      },
      { timeoutMs: 30_000, label: 'M1 replied' },
    );
    // Read from the start, the conversation is every item once, M1's reply after M2's.
    const all = await ok(read('reopen'));
    expect(all.items.map((i: Json) => [i.kind, i.event_id])).toEqual([
      ['user', m1.event_id],
      ['user', m2.event_id],
      ['reply', m2.event_id],
      ['reply', m1.event_id],
    ]);
  });

  it('a viewer may read but not send; another tenant gets 404', async () => {
    const refused = await send({ conversation_id: 'v', text: 'no' }, a.viewerKey);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');
    expect((await read('v', undefined, a.viewerKey)).status).toBe(200);

    // B's keys: on A's tenant path (the tenant check), and on its own naming A's binding.
    for (const token of [b.adminKey, b.viewerKey]) {
      const get = await api(h.app, 'GET', messagesPath(a.tenantId, bindingId, '?conversation_id=v'), {
        token,
      });
      expect(get.status).toBe(404);
    }
    expect((await send({ conversation_id: 'v', text: 'x' }, b.adminKey)).status).toBe(404);
    const own = await send({ conversation_id: 'v', text: 'x' }, b.adminKey, bindingId, b.tenantId);
    expect(own.status).toBe(404);
    expect(own.body.error.code).toBe('not_found');
    const ownRead = await api(h.app, 'GET', messagesPath(b.tenantId, bindingId, '?conversation_id=v'), {
      token: b.viewerKey,
    });
    expect(ownRead.status).toBe(404);
  });

  it('refuses a binding that is not a console binding or not active, and a foreign cursor', async () => {
    const telegram = await send({ conversation_id: 'c', text: 'x' }, a.adminKey, a.bindingId);
    expect(telegram.status).toBe(409);
    expect(telegram.body.error).toMatchObject({
      code: 'conflict',
      details: { reason: 'not_console_binding' },
    });
    const telegramRead = await api(
      h.app,
      'GET',
      messagesPath(a.tenantId, a.bindingId, '?conversation_id=c'),
      {
        token: a.viewerKey,
      },
    );
    expect(telegramRead.status).toBe(409);

    const draft = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        token: a.adminKey,
        body: { channel: 'console', app_id: a.appId },
      }),
      201,
    );
    const before = await h.sql`select 1 from message_event where binding_id = ${draft.binding_id}`;
    const notActive = await send({ conversation_id: 'c', text: 'x' }, a.adminKey, draft.binding_id);
    expect(notActive.status).toBe(409);
    expect(notActive.body.error.details).toEqual({ reason: 'binding_not_active' });
    expect(await h.sql`select 1 from message_event where binding_id = ${draft.binding_id}`).toEqual(before);

    // Activation needs no secret and no proof.
    const active = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, `/bindings/${draft.binding_id}/status-transitions`), {
        token: a.adminKey,
        body: { expected_version: draft.version, next_status: 'active' },
      }),
    );
    expect(active.status).toBe('active');
    await ok(send({ conversation_id: 'c', text: 'now' }, a.adminKey, draft.binding_id), 202);

    for (const bad of [
      'x',
      Buffer.from('["cv",1]').toString('base64url'),
      Buffer.from('["cv2",1,0,[2,"running"]]').toString('base64url'), // watches a message past userSeq
      Buffer.from('["cv2",1,0,[1,"nonsense"]]').toString('base64url'),
      Buffer.from('[1,2]').toString('base64url'),
    ]) {
      const res = await read('c', bad);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    for (const body of [
      { conversation_id: 'has space', text: 'x' },
      { conversation_id: 'c', text: '' },
      { conversation_id: 'c', text: '   ' },
      { conversation_id: 'c', text: 'x'.repeat(4097) },
      { conversation_id: 'c', text: 'x', client_message_id: 'a/b' },
      { conversation_id: 'c', text: 'x', extra: 1 },
    ]) {
      expect((await send(body)).status, JSON.stringify(body).slice(0, 80)).toBe(400);
    }
  });
  it("a suspended tenant's message is recorded and answered with the fixed reply; a disabled tenant's is refused", async () => {
    const consoleB = await ok(
      api(h.app, 'POST', tenantPath(b.tenantId, '/bindings'), {
        token: b.adminKey,
        body: { channel: 'console', app_id: b.appId, activate: true },
      }),
      201,
    );
    const transition = async (next_status: string) => {
      const t = await ok(api(h.app, 'GET', tenantPath(b.tenantId)));
      await ok(
        api(h.app, 'POST', tenantPath(b.tenantId, '/status-transitions'), {
          body: { expected_version: t.version, next_status, reason: 'console test' },
        }),
      );
    };
    await transition('suspended');
    const sent = await ok(
      send({ conversation_id: 's', text: 'anyone?' }, b.adminKey, consoleB.binding_id, b.tenantId),
      202,
    );
    await waitFor(
      async () => {
        const page = await ok(
          api(h.app, 'GET', messagesPath(b.tenantId, consoleB.binding_id, '?conversation_id=s'), {
            token: b.viewerKey,
          }),
        );
        return page.items.some((i: Json) => i.kind === 'reply' && i.event_id === sent.event_id);
      },
      { timeoutMs: 30_000, label: 'suspended reply' },
    );
    const [seg] = await h.sql`select content from reply_outbox where event_id = ${sent.event_id}`;
    expect(seg!.content).toBe('This service is temporarily unavailable.');

    await transition('disabled');
    const refused = await send(
      { conversation_id: 's', text: 'hello?' },
      TEST_ADMIN_TOKEN,
      consoleB.binding_id,
      b.tenantId,
    );
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('tenant_disabled');
  });
});
