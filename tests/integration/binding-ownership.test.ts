import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import {
  type AdminTenant,
  api,
  type Json,
  newTelegramBot,
  ok,
  setupTenant,
  snapshotTenant,
  type TelegramBot,
  tenantPath,
} from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

/** A port nothing listens on (bound, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

// Proof of ownership at activation: the provider itself (the fakes, speaking the Bot API and WeCom's
// gettoken over HTTP) must confirm that a binding's secret controls the account it names. A bot id
// or corp id is public; without the proof, whoever activates first locks the real owner out.
describe('binding activation proves ownership of the account', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let wecom: FakeWecom;
  let a: AdminTenant;
  let b: AdminTenant;

  beforeAll(async () => {
    h = await createHarness();
    [telegram, wecom] = await Promise.all([startFakeTelegram(), startFakeWecom()]);
    [a, b] = await Promise.all([setupTenant(h.app, { telegram }), setupTenant(h.app, { telegram })]);
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([telegram?.close(), wecom?.close()]);
  });

  let seq = 0;
  const as = (t: AdminTenant) => ({ token: t.adminKey });

  /** A telegram_bot secret for `bot` and a draft binding (or an attempt to create it active). */
  async function telegramBinding(
    t: AdminTenant,
    bot: TelegramBot,
    opts: { activate?: boolean; apiBaseUrl?: string } = {},
  ) {
    const secret = await ok(
      api(h.app, 'POST', tenantPath(t.tenantId, '/secrets'), {
        ...as(t),
        body: {
          name: `bot-${seq++}`,
          purpose: 'telegram_bot',
          value: { bot_token: bot.botToken, webhook_secret_token: bot.webhookSecret },
        },
      }),
      201,
    );
    const res = await api(h.app, 'POST', tenantPath(t.tenantId, '/bindings'), {
      ...as(t),
      body: {
        channel: 'telegram',
        provider_account_id: bot.botId,
        app_id: t.appId,
        secret_ref: secret.secret_ref,
        config: { api_base_url: opts.apiBaseUrl ?? telegram.url },
        ...(opts.activate ? { activate: true } : {}),
      },
    });
    return { secret, res };
  }

  async function draft(t: AdminTenant, bot: TelegramBot, apiBaseUrl?: string): Promise<Json> {
    const { res } = await telegramBinding(t, bot, { apiBaseUrl });
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe('draft');
    return res.body;
  }

  const activate = (t: AdminTenant, bindingId: string, body: Record<string, unknown> = {}, token?: string) =>
    api(h.app, 'POST', tenantPath(t.tenantId, `/bindings/${bindingId}/status-transitions`), {
      token: token === undefined ? t.adminKey : token,
      body: { expected_version: 1, next_status: 'active', ...body },
    });

  const bindingRow = async (t: AdminTenant, bindingId: string) =>
    (await ok(api(h.app, 'GET', tenantPath(t.tenantId, `/bindings/${bindingId}`), as(t)))) as Json;

  const auditOf = (tenantId: string) =>
    h.sql<{ action: string; reason: string | null; actor_type: string; details: Json }[]>`
      select action, reason, actor_type, details from audit_log where tenant_id = ${tenantId} order by seq`;

  /** The envelope without its request id: what a caller could compare between two refusals. */
  const refusal = (res: { body: Json }) => {
    const { request_id: _id, ...rest } = res.body.error;
    return rest;
  };

  it('a token whose getMe answers another bot id: 409 ownership_not_proven, the binding unchanged', async () => {
    const bot = newTelegramBot();
    telegram.addBot(bot.botToken);
    telegram.setBotIdentity(bot.botToken, { id: Number(bot.botId) + 1 });
    const d = await draft(a, bot);
    const auditBefore = await auditOf(a.tenantId);

    const refused = await activate(a, d.binding_id);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('conflict');
    expect(refused.body.error.details).toEqual({
      reason: 'ownership_not_proven',
      failure: 'account_mismatch',
    });
    expect(refused.body.error.message).toMatch(/^Ownership of the provider account was not proven/);
    expect(refused.text).not.toContain(bot.botToken);
    expect(await bindingRow(a, d.binding_id)).toMatchObject({
      status: 'draft',
      version: 1,
      updated_at: d.updated_at,
    });
    expect(await auditOf(a.tenantId)).toEqual(auditBefore);
    // getMe was asked, with the binding's token, at the binding's api_base_url.
    expect(telegram.requests.some((r) => r.endpoint === 'getMe' && r.token === bot.botToken)).toBe(true);

    // Created active with the same secret: refused alike, and no binding is written.
    const count = async () =>
      (await h.sql`select count(*)::int as n from channel_binding where tenant_id = ${a.tenantId}`)[0]!.n;
    const before = await count();
    const { res: createdActive } = await telegramBinding(a, bot, { activate: true });
    expect(createdActive.status).toBe(409);
    expect(refusal(createdActive)).toEqual(refusal(refused));
    expect(await count()).toBe(before);

    // Once the provider confirms the bot id, the same draft activates.
    telegram.setBotIdentity(bot.botToken, undefined);
    expect(await ok(activate(a, d.binding_id))).toMatchObject({ status: 'active', version: 2 });
  });

  it("a proof is asked only of the provider's own API or a base the platform allows", async () => {
    // The attack: a server of the tenant's own answering getMe with someone else's bot id. The
    // suite's app allows any base (its fakes stand in for Telegram); a deployment's does not.
    const strict = newApp({ ...h.appDeps, proofApiBases: undefined });
    const listed = newApp({ ...h.appDeps, proofApiBases: [telegram.url.replace(/\/+$/, '')] });
    const bot = newTelegramBot();
    telegram.addBot(bot.botToken);
    const d = await draft(a, bot);
    const asked = () =>
      telegram.requests.filter((r) => r.endpoint === 'getMe' && r.token === bot.botToken).length;
    const before = asked();
    const refused = await api(
      strict,
      'POST',
      tenantPath(a.tenantId, `/bindings/${d.binding_id}/status-transitions`),
      {
        token: a.adminKey,
        body: { expected_version: 1, next_status: 'active' },
      },
    );
    expect(refused.status).toBe(409);
    expect(refused.body.error.details).toEqual({
      reason: 'ownership_not_proven',
      failure: 'api_base_not_allowed',
    });
    expect(asked()).toBe(before); // nothing was sent to the tenant's server
    expect(await bindingRow(a, d.binding_id)).toMatchObject({ status: 'draft', version: 1 });
    const allowed = await api(
      listed,
      'POST',
      tenantPath(a.tenantId, `/bindings/${d.binding_id}/status-transitions`),
      {
        token: a.adminKey,
        body: { expected_version: 1, next_status: 'active' },
      },
    );
    expect(allowed.status, allowed.text).toBe(200);
  });

  it('a rejected token and an unreachable provider: 409 with their class, nothing changes', async () => {
    const bot = newTelegramBot(); // never registered: getMe answers 401
    const d = await draft(a, bot);
    const rejected = await activate(a, d.binding_id);
    expect(rejected.status).toBe(409);
    expect(rejected.body.error.details).toEqual({
      reason: 'ownership_not_proven',
      failure: 'token_rejected',
    });

    telegram.addBot(bot.botToken);
    telegram.setFaultPlan((r) => (r.endpoint === 'getMe' ? { kind: 'status', status: 502 } : undefined));
    try {
      const busy = await activate(a, d.binding_id);
      expect(busy.status).toBe(409);
      expect(busy.body.error.details).toEqual({
        reason: 'ownership_not_proven',
        failure: 'provider_unreachable',
      });
    } finally {
      telegram.setFaultPlan(undefined);
    }

    // Nothing listens there: no connection, nothing sent.
    const other = newTelegramBot();
    const closed = await draft(a, other, `http://127.0.0.1:${await closedPort()}`);
    const unreachable = await activate(a, closed.binding_id);
    expect(unreachable.status).toBe(409);
    expect(unreachable.body.error.details.failure).toBe('provider_unreachable');

    expect((await bindingRow(a, d.binding_id)).status).toBe('draft');
    expect((await bindingRow(a, closed.binding_id)).status).toBe('draft');
    expect(await ok(activate(a, d.binding_id))).toMatchObject({ status: 'active' });
  });

  it("tenant B activating A's bot gets the 409 of any unproven ownership; A is unaffected", async () => {
    const before = await snapshotTenant(h.sql, a.tenantId);

    // B holds A's real token: getMe confirms the bot, the one-active-binding index refuses. What B
    // is told is exactly what a token of another bot id gets, so A's binding is not revealed.
    const stolen = await telegramBinding(b, a.bot, { activate: true });
    expect(stolen.res.status).toBe(409);
    const impostor = newTelegramBot();
    telegram.addBot(impostor.botToken);
    telegram.setBotIdentity(impostor.botToken, { id: Number(impostor.botId) + 7 });
    const mismatch = await telegramBinding(b, impostor, { activate: true });
    expect(mismatch.res.status).toBe(409);
    expect(refusal(stolen.res)).toEqual(refusal(mismatch.res));
    for (const leak of [a.tenantId, a.bindingId, a.bot.botToken, 'Another active binding']) {
      expect(stolen.res.text).not.toContain(leak);
    }

    // A token of A's bot id that B made up: the provider rejects it.
    const guessed = { ...a.bot, botToken: `${a.bot.botId}:AA${randomBytes(16).toString('base64url')}` };
    const guess = await telegramBinding(b, guessed, { activate: true });
    expect(guess.res.status).toBe(409);
    expect(guess.res.body.error.details).toEqual({
      reason: 'ownership_not_proven',
      failure: 'token_rejected',
    });

    // A draft of B for A's bot, activated: the same refusal; the draft stays a draft.
    const d = await draft(b, a.bot);
    const later = await activate(b, d.binding_id);
    expect(refusal(later)).toEqual(refusal(mismatch.res));
    expect(await bindingRow(b, d.binding_id)).toMatchObject({ status: 'draft', version: 1 });

    expect(await snapshotTenant(h.sql, a.tenantId)).toEqual(before);
    expect((await bindingRow(a, a.bindingId)).status).toBe('active');
  });

  it('a second active binding of the same tenant for an account is named', async () => {
    const bot = newTelegramBot();
    telegram.addBot(bot.botToken);
    const first = await telegramBinding(a, bot, { activate: true });
    expect(first.res.status).toBe(201);
    const second = await telegramBinding(a, bot, { activate: true });
    expect(second.res.status).toBe(409);
    expect(second.res.body.error.details).toEqual({ binding_id: first.res.body.binding_id });
  });

  it('a secret rotated while the provider is asked: refused, the binding unchanged', async () => {
    const bot = newTelegramBot();
    telegram.addBot(bot.botToken);
    const { secret, res } = await telegramBinding(a, bot);
    const bindingId = res.body.binding_id as string;
    const asked = telegram.requests.length;
    telegram.setFaultPlan((r) =>
      r.endpoint === 'getMe' && r.token === bot.botToken ? { kind: 'delay', ms: 400 } : undefined,
    );
    try {
      const pending = activate(a, bindingId);
      while (!telegram.requests.slice(asked).some((r) => r.endpoint === 'getMe')) {
        await new Promise((r) => setTimeout(r, 10));
      }
      await ok(
        api(h.app, 'PUT', tenantPath(a.tenantId, `/secrets/${secret.name}`), {
          ...as(a),
          body: { value: { bot_token: bot.botToken, webhook_secret_token: 'rotated-token' } },
        }),
      );
      const refused = await pending;
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toMatch(/rotated during activation/);
    } finally {
      telegram.setFaultPlan(undefined);
    }
    expect(await bindingRow(a, bindingId)).toMatchObject({ status: 'draft', version: 1 });
  });

  it('the platform token arbitrates: the proven binding activates, the other is suspended and audited', async () => {
    // Fresh tenants: the holder (H) has the account active; the claimant (C) proves it holds the token.
    const [holder, claimant] = await Promise.all([
      setupTenant(h.app, { telegram }),
      setupTenant(h.app, { telegram }),
    ]);
    const d = await draft(claimant, holder.bot);
    const target = { tenant_id: holder.tenantId, binding_id: holder.bindingId };
    const reason = 'ticket 4711: the bot belongs to the claimant';

    // Not for tenant keys, and only with a reason and a binding of the same account.
    const byTenant = await activate(claimant, d.binding_id, { displace_binding: target, reason });
    expect(byTenant.status).toBe(403);
    const platformNoReason = await api(
      h.app,
      'POST',
      tenantPath(claimant.tenantId, `/bindings/${d.binding_id}/status-transitions`),
      { body: { expected_version: 1, next_status: 'active', displace_binding: target } },
    );
    expect(platformNoReason.status).toBe(400);
    const platform = (body: Record<string, unknown>) =>
      api(h.app, 'POST', tenantPath(claimant.tenantId, `/bindings/${d.binding_id}/status-transitions`), {
        body: { expected_version: 1, next_status: 'active', ...body },
      });
    const wrongTarget = await platform({
      displace_binding: { tenant_id: a.tenantId, binding_id: a.bindingId },
      reason,
    });
    expect(wrongTarget.status).toBe(400);
    expect(wrongTarget.body.error.details.fields[0].path).toBe('displace_binding');
    // The platform is told why a plain activation fails.
    const plain = await platform({});
    expect(plain.status).toBe(409);
    expect(plain.body.error.message).toContain('Another active binding');
    expect((await bindingRow(holder, holder.bindingId)).status).toBe('active');
    expect((await bindingRow(claimant, d.binding_id)).status).toBe('draft');

    const done = await ok(platform({ displace_binding: target, reason }));
    expect(done).toMatchObject({ status: 'active', version: 2 });
    expect(await bindingRow(holder, holder.bindingId)).toMatchObject({ status: 'suspended', version: 2 });
    const holderAudit = (await auditOf(holder.tenantId)).at(-1)!;
    expect(holderAudit).toMatchObject({
      action: 'binding.suspend',
      reason,
      actor_type: 'platform',
      details: { binding_id: holder.bindingId, displaced_by_arbitration: true },
    });
    expect(JSON.stringify(holderAudit)).not.toContain(claimant.tenantId);
    expect((await auditOf(claimant.tenantId)).at(-1)).toMatchObject({
      action: 'binding.activate',
      reason,
      actor_type: 'platform',
      details: { binding_id: d.binding_id, displaced_other_binding: true },
    });

    // The holder cannot take it back: the account is now the claimant's.
    const back = await api(
      h.app,
      'POST',
      tenantPath(holder.tenantId, `/bindings/${holder.bindingId}/status-transitions`),
      { ...as(holder), body: { expected_version: 2, next_status: 'active' } },
    );
    expect(back.status).toBe(409);
    expect(back.body.error.details).toEqual({ reason: 'ownership_not_proven', failure: 'account_mismatch' });
  });

  describe('WeCom', () => {
    const aesKey = () =>
      randomBytes(32)
        .toString('base64')
        .replace(/[^A-Za-z0-9]/g, 'a')
        .slice(0, 43);

    async function wecomBinding(corpId: string, corpSecret: string) {
      const secret = await ok(
        api(h.app, 'POST', tenantPath(a.tenantId, '/secrets'), {
          ...as(a),
          body: {
            name: `wc-${seq++}`,
            purpose: 'wecom_app',
            value: { token: 'tok', encoding_aes_key: aesKey(), corp_secret: corpSecret },
          },
        }),
        201,
      );
      return api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        ...as(a),
        body: {
          channel: 'wecom',
          provider_account_id: `${corpId}/1000002`,
          app_id: a.appId,
          secret_ref: secret.secret_ref,
          config: { corp_id: corpId, agent_id: 1000002, api_base_url: wecom.url },
          activate: true,
        },
      });
    }

    it('gettoken must succeed for the corp: a wrong secret, an unknown corp and a busy WeCom are 409', async () => {
      const corpId = `ww${randomBytes(6).toString('hex')}`;
      const corpSecret = randomBytes(16).toString('base64url');
      wecom.addApp({ corpId, corpSecret, agentId: 1000002 });
      const count = async () =>
        (await h.sql`select count(*)::int as n from channel_binding where tenant_id = ${a.tenantId}`)[0]!.n;
      const before = await count();

      const wrong = await wecomBinding(corpId, `${corpSecret}x`);
      expect(wrong.status).toBe(409);
      expect(wrong.body.error.details).toEqual({ reason: 'ownership_not_proven', failure: 'token_rejected' });
      expect(wrong.text).not.toContain(corpSecret);
      const unknown = await wecomBinding(`ww${randomBytes(6).toString('hex')}`, corpSecret);
      expect(unknown.status).toBe(409);
      expect(unknown.body.error.details.failure).toBe('token_rejected');
      wecom.failGettoken(corpId, -1);
      try {
        const busy = await wecomBinding(corpId, corpSecret);
        expect(busy.status).toBe(409);
        expect(busy.body.error.details.failure).toBe('provider_unreachable');
      } finally {
        wecom.failGettoken(corpId, undefined);
      }
      expect(await count()).toBe(before);

      const proven = await wecomBinding(corpId, corpSecret);
      expect(proven.status, proven.text).toBe(201);
      expect(proven.body.status).toBe('active');
    });
  });
});
