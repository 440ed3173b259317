import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminTenant, api, type Json, ok, setupTwoTenants, tenantPath } from '../helpers/admin';
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
  /** Polls the conversation from `after` until `n` new items arrived; returns them and the cursor. */
  async function pollFor(conversation: string, after: string | undefined, n: number) {
    const items: Json[] = [];
    let cursor = after;
    await waitFor(
      async () => {
        const page = await ok(read(conversation, cursor));
        items.push(...page.items);
        cursor = page.next_cursor;
        expect(typeof cursor).toBe('string');
        return items.length >= n;
      },
      { timeoutMs: 30_000, label: `${n} console items` },
    );
    return { items, cursor: cursor as string };
  }

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
    expect(items).toEqual([
      expect.objectContaining({
        kind: 'reply',
        event_id: accepted.event_id,
        segment_index: 0,
        text: 'You said: hello console',
        status: 'sent',
      }),
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
    const more = await pollFor('late', cursor, 2);
    expect(more.items.map((i: Json) => [i.kind, i.event_id, i.text])).toEqual([
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
    const { items } = await pollFor('dup', undefined, 2);
    const again = await ok(send(body), 202);
    expect(again).toMatchObject({ event_id: x.event_id, duplicate: true });
    const rows =
      await h.sql`select 1 from message_event where tenant_id = ${a.tenantId} and event_id = ${x.event_id}`;
    expect(rows).toHaveLength(1);
    const [{ n }] =
      (await h.sql`select count(*)::int as n from reply_outbox where event_id = ${x.event_id}`) as Json;
    expect(n).toBe(1);
    expect(items.map((i: Json) => i.kind)).toEqual(['user', 'reply']);
    const audits = await h.sql`
      select actor_id, user_id from audit_log
      where tenant_id = ${a.tenantId} and action = 'console.message' and details ->> 'event_id' = ${x.event_id}`;
    expect(audits).toEqual([{ actor_id: a.adminKeyId, user_id: `console:${a.adminKeyId}` }]);
    // The platform token may send too.
    await ok(send({ conversation_id: 'dup', text: 'from the platform' }, TEST_ADMIN_TOKEN), 202);
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
