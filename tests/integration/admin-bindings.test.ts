import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeKeyDigest } from '../../api/ingress/candidate';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import { type AdminTenant, api, newTelegramBot, ok, setupTwoTenants, tenantPath } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';
import { telegramTextUpdate } from '../helpers/seed';

// Channel bindings through the admin API: route keys, activation checks, cross-tenant uniqueness.
// Activation asks the provider (the fakes, over HTTP) to confirm the account; see also
// binding-ownership.test.ts.
describe('admin API: bindings', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;
  let as: { token: string };
  let wecom: FakeWecom;

  beforeAll(async () => {
    h = await createHarness();
    wecom = await startFakeWecom();
    ({ a, b } = await setupTwoTenants(h.app));
    as = { token: a.adminKey };
  });
  afterAll(async () => {
    await wecom?.close();
    await h?.close();
  });

  const at = (rest: string) => tenantPath(a.tenantId, rest);

  describe('bindings', () => {
    async function secret(tenant: AdminTenant, name: string, value: unknown, purpose = 'telegram_bot') {
      return ok(
        api(h.app, 'POST', tenantPath(tenant.tenantId, '/secrets'), {
          token: tenant.adminKey,
          body: { name, purpose, value },
        }),
        201,
      );
    }

    it('returns the route key once, stores only its digest, and the webhook path works', async () => {
      const bot = newTelegramBot();
      a.telegram.addBot(bot.botToken);
      const s = await secret(a, 'bot-two', {
        bot_token: bot.botToken,
        webhook_secret_token: bot.webhookSecret,
      });
      const created = await ok(
        api(h.app, 'POST', at('/bindings'), {
          ...as,
          body: {
            channel: 'telegram',
            provider_account_id: bot.botId,
            app_id: a.appId,
            secret_ref: s.secret_ref,
            config: { api_base_url: a.telegram.url },
            activate: true,
          },
        }),
        201,
      );
      expect(created).toMatchObject({ status: 'active', version: 1, channel: 'telegram' });
      expect(created.route_key).toMatch(/^[A-Za-z0-9_-]{22,128}$/);
      expect(created.webhook_path).toBe(`/v1/webhooks/telegram/${created.route_key}`);

      const [row] = await h.sql`select * from channel_binding where binding_id = ${created.binding_id}`;
      expect(row!.public_route_key_digest).toBe(routeKeyDigest(created.route_key));
      expect(JSON.stringify(row)).not.toContain(created.route_key);
      const read = await ok(api(h.app, 'GET', at(`/bindings/${created.binding_id}`), as));
      expect(read.route_key).toBeUndefined();
      expect(JSON.stringify(await ok(api(h.app, 'GET', at('/bindings'), as)))).not.toContain(
        created.route_key,
      );

      // Ingress accepts the binding the API made: the update is recorded and listed with its UI link.
      const res = await h.app.request(created.webhook_path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': bot.webhookSecret },
        body: JSON.stringify(telegramTextUpdate({ chatId: 5151, text: 'hi' })),
      });
      expect(res.status).toBe(200);
      const messages = await ok(api(h.app, 'GET', at('/messages?limit=5'), as));
      const mine = messages.items.find((m: { binding_id: string }) => m.binding_id === created.binding_id);
      expect(mine.temporal_ui_url).toBe(
        `http://127.0.0.1:8233/namespaces/default/workflows/${encodeURIComponent(mine.workflow_id)}`,
      );
    });

    it('activates only with a well-shaped secret of the same tenant that the provider confirms', async () => {
      const bot = newTelegramBot();
      // A half secret is refused when it is stored, naming the missing field and not the value.
      const refused = await api(h.app, 'POST', at('/secrets'), {
        ...as,
        body: { name: 'half-bot', purpose: 'telegram_bot', value: { bot_token: bot.botToken } },
      });
      expect(refused.status).toBe(400);
      expect(refused.body.error.details.fields.map((f: { path: string }) => f.path)).toEqual([
        'value.webhook_secret_token',
      ]);
      expect(refused.text).not.toContain(bot.botToken);
      const half = await secret(a, 'half-bot', {
        bot_token: bot.botToken,
        webhook_secret_token: bot.webhookSecret,
      });
      const body = {
        channel: 'telegram',
        provider_account_id: bot.botId,
        app_id: a.appId,
        secret_ref: half.secret_ref,
        config: { api_base_url: a.telegram.url },
      };

      const foreign = await api(h.app, 'POST', at('/bindings'), {
        ...as,
        body: { ...body, secret_ref: b.secretRef },
      });
      expect(foreign.status).toBe(400);
      expect(foreign.body.error.details.fields[0].path).toBe('secret_ref');
      const foreignApp = await api(h.app, 'POST', at('/bindings'), {
        ...as,
        body: { ...body, app_id: b.appId },
      });
      expect(foreignApp.status).toBe(400);

      const draft = await ok(api(h.app, 'POST', at('/bindings'), { ...as, body }), 201);
      expect(draft.status).toBe('draft');
      const path = at(`/bindings/${draft.binding_id}/status-transitions`);
      // The Bot API does not know the token yet: getMe answers 401.
      const early = await api(h.app, 'POST', path, {
        ...as,
        body: { expected_version: 1, next_status: 'active' },
      });
      expect(early.status).toBe(409);
      expect(early.body.error.details).toEqual({ reason: 'ownership_not_proven', failure: 'token_rejected' });
      a.telegram.addBot(bot.botToken);

      // Rotated to a token of another bot: still refused; then to the right shape: active.
      const other = newTelegramBot();
      await ok(
        api(h.app, 'PUT', at('/secrets/half-bot'), {
          ...as,
          body: { value: { bot_token: other.botToken, webhook_secret_token: other.webhookSecret } },
        }),
      );
      const mismatch = await api(h.app, 'POST', path, {
        ...as,
        body: { expected_version: 1, next_status: 'active' },
      });
      expect(mismatch.status).toBe(409);
      await ok(
        api(h.app, 'PUT', at('/secrets/half-bot'), {
          ...as,
          body: { value: { bot_token: bot.botToken, webhook_secret_token: bot.webhookSecret } },
        }),
      );
      const active = await ok(
        api(h.app, 'POST', path, { ...as, body: { expected_version: 1, next_status: 'active' } }),
      );
      expect(active).toMatchObject({ status: 'active', version: 2 });
      const suspended = await ok(
        api(h.app, 'POST', path, { ...as, body: { expected_version: 2, next_status: 'suspended' } }),
      );
      expect(suspended.status).toBe('suspended');
      const stale = await api(h.app, 'POST', path, {
        ...as,
        body: { expected_version: 2, next_status: 'active' },
      });
      expect(stale.body.error.code).toBe('optimistic_conflict');
      await ok(api(h.app, 'POST', path, { ...as, body: { expected_version: 3, next_status: 'disabled' } }));
      const dead = await api(h.app, 'POST', path, {
        ...as,
        body: { expected_version: 4, next_status: 'active' },
      });
      expect(dead.body.error.code).toBe('invalid_transition');
    });

    it('refuses a second active binding for the same bot, even in another tenant', async () => {
      // B holds a secret for A's bot (same token): shape, id and getMe checks pass, the index
      // refuses — with the answer of an unproven ownership, so A's binding is not revealed.
      const s = await secret(b, 'copied-bot', { bot_token: a.bot.botToken, webhook_secret_token: 'x' });
      const body = {
        channel: 'telegram',
        provider_account_id: a.bot.botId,
        app_id: b.appId,
        secret_ref: s.secret_ref,
        config: { api_base_url: a.telegram.url },
      };
      const before =
        await h.sql`select count(*)::int as n from channel_binding where tenant_id = ${b.tenantId}`;
      const clash = await api(h.app, 'POST', tenantPath(b.tenantId, '/bindings'), {
        token: b.adminKey,
        body: { ...body, activate: true },
      });
      expect(clash.status).toBe(409);
      expect(clash.body.error.code).toBe('conflict');
      expect(clash.body.error.details).toEqual({
        reason: 'ownership_not_proven',
        failure: 'account_mismatch',
      });
      expect(clash.text).not.toContain(a.tenantId);
      expect(clash.text).not.toContain(a.bindingId);
      expect(
        await h.sql`select count(*)::int as n from channel_binding where tenant_id = ${b.tenantId}`,
      ).toEqual(before);

      const draft = await ok(
        api(h.app, 'POST', tenantPath(b.tenantId, '/bindings'), { token: b.adminKey, body }),
        201,
      );
      const activate = await api(
        h.app,
        'POST',
        tenantPath(b.tenantId, `/bindings/${draft.binding_id}/status-transitions`),
        {
          token: b.adminKey,
          body: { expected_version: 1, next_status: 'active' },
        },
      );
      expect(activate.status).toBe(409);
      expect(activate.body.error.code).toBe('conflict');
    });

    it('canonicalises WeCom accounts as {corp_id}/{agent_id} and checks the WeCom secret shape', async () => {
      const s = await secret(
        a,
        'wecom-app',
        {
          token: 'tok123',
          encoding_aes_key: randomBytes(32)
            .toString('base64')
            .replace(/[^A-Za-z0-9]/g, 'a')
            .slice(0, 43),
          corp_secret: 'cs',
        },
        'wecom_app',
      );
      wecom.addApp({ corpId: 'ww0123abcd', corpSecret: 'cs', agentId: 1000002 });
      const config = { corp_id: 'ww0123abcd', agent_id: 1000002, api_base_url: wecom.url };
      const wrong = await api(h.app, 'POST', at('/bindings'), {
        ...as,
        body: {
          channel: 'wecom',
          provider_account_id: 'ww0123abcd',
          app_id: a.appId,
          secret_ref: s.secret_ref,
          config,
        },
      });
      expect(wrong.status).toBe(400);
      expect(wrong.body.error.details.fields[0].path).toBe('provider_account_id');
      const stringAgent = await api(h.app, 'POST', at('/bindings'), {
        ...as,
        body: {
          channel: 'wecom',
          provider_account_id: 'ww0123abcd/1000002',
          app_id: a.appId,
          secret_ref: s.secret_ref,
          config: { ...config, agent_id: '1000002' },
        },
      });
      expect(stringAgent.status).toBe(400);
      const created = await ok(
        api(h.app, 'POST', at('/bindings'), {
          ...as,
          body: {
            channel: 'wecom',
            provider_account_id: `ww0123abcd/${1000002}`,
            app_id: a.appId,
            secret_ref: s.secret_ref,
            config,
            activate: true,
          },
        }),
        201,
      );
      expect(created.webhook_path).toBe(`/v1/webhooks/wecom/${created.route_key}`);
      expect(created.config).toEqual(config);
      const tgSecret = await api(h.app, 'POST', at('/bindings'), {
        ...as,
        body: {
          channel: 'wecom',
          provider_account_id: 'ww0123abcd/7',
          app_id: a.appId,
          secret_ref: a.secretRef,
          config: { ...config, agent_id: 7 },
          activate: true,
        },
      });
      // A Telegram secret is not a WeCom one: refused by purpose, nothing written.
      expect(tgSecret.status).toBe(400);
      expect(tgSecret.body.error.details.fields[0].path).toBe('secret_ref');
    });
  });
});
