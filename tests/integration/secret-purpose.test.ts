import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newId } from '../../db/ids';
import { runMigrations } from '../../db/migrate';
import { contentDigest, sha256Hex } from '../../lib/digest';
import {
  type AdminTenant,
  api,
  type Json,
  ok,
  setupTenant,
  snapshotTenant,
  tenantPath,
  uniqueKey,
} from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Purpose-bound secrets: a secret's purpose is fixed at creation, its value has that purpose's shape
// on creation and on every rotation, and every reference to it must be one its purpose allows — in
// the admin API (a named 400, nothing written) and in the database (triggers, migration 0023).
describe('secrets are bound to one purpose', () => {
  let h: Harness;
  let a: AdminTenant;
  const as = () => ({ token: a.adminKey });
  const at = (rest: string) => tenantPath(a.tenantId, rest);
  const aesKey = () =>
    randomBytes(32)
      .toString('base64')
      .replace(/[^A-Za-z0-9]/g, 'a')
      .slice(0, 43);
  const refs: Record<'llm' | 'wecom' | 'tool', string> = { llm: '', wecom: '', tool: '' };

  beforeAll(async () => {
    h = await createHarness();
    a = await setupTenant(h.app);
    const create = async (name: string, purpose: string, value: unknown) =>
      (await ok(api(h.app, 'POST', at('/secrets'), { ...as(), body: { name, purpose, value } }), 201))
        .secret_ref as string;
    refs.llm = await create('llm', 'model_api_key', { api_key: `sk-${randomBytes(8).toString('hex')}` });
    refs.wecom = await create('wecom', 'wecom_app', {
      token: 'tok',
      encoding_aes_key: aesKey(),
      corp_secret: 'cs',
    });
    refs.tool = await create('tool', 'tool_credential', 'anything at all');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is required at creation and listed with the secret', async () => {
    const missing = await api(h.app, 'POST', at('/secrets'), { ...as(), body: { name: 'x', value: 'v' } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details.fields[0].path).toBe('purpose');
    const unknown = await api(h.app, 'POST', at('/secrets'), {
      ...as(),
      body: { name: 'x', purpose: 'anything', value: 'v' },
    });
    expect(unknown.status).toBe(400);
    const list = await ok(api(h.app, 'GET', at('/secrets'), as()));
    const purposes = Object.fromEntries(list.items.map((s: Json) => [s.name, s.purpose]));
    expect(purposes).toEqual({
      'telegram-bot': 'telegram_bot',
      llm: 'model_api_key',
      wecom: 'wecom_app',
      tool: 'tool_credential',
    });
  });

  it('refuses a reference of the wrong purpose, naming it and the purpose needed; nothing is written', async () => {
    const before = await snapshotTenant(h.sql, a.tenantId);
    const profile = {
      provider: 'openai_compatible',
      model: 'm',
      base_url: 'https://llm.example.test/v1',
    };
    const telegram = (secretRef: string, extra: Record<string, unknown> = {}) => ({
      channel: 'telegram',
      provider_account_id: a.bot.botId,
      app_id: a.appId,
      secret_ref: secretRef,
      config: { api_base_url: a.telegram.url },
      ...extra,
    });
    const wecom = (secretRef: string) => ({
      channel: 'wecom',
      provider_account_id: 'ww0123/1000002',
      app_id: a.appId,
      secret_ref: secretRef,
      config: { corp_id: 'ww0123', agent_id: 1000002 },
    });
    const attempts: [string, string, Json, string, string][] = [
      // The attack of the issue: a channel secret as a model API key, sent to any base_url.
      [
        'POST',
        at('/model-profiles'),
        { profile_key: 'steal', ...profile, api_key_secret_ref: a.secretRef },
        'api_key_secret_ref',
        'model_api_key',
      ],
      [
        'POST',
        at('/model-profiles'),
        { profile_key: 'steal', ...profile, api_key_secret_ref: refs.wecom },
        'api_key_secret_ref',
        'model_api_key',
      ],
      [
        'PUT',
        at(`/model-profiles/${a.modelProfileId}`),
        { expected_version: 1, ...profile, api_key_secret_ref: refs.tool },
        'api_key_secret_ref',
        'model_api_key',
      ],
      ['POST', at('/bindings'), telegram(refs.llm), 'secret_ref', 'telegram_bot'],
      ['POST', at('/bindings'), telegram(refs.tool, { activate: true }), 'secret_ref', 'telegram_bot'],
      ['POST', at('/bindings'), telegram(refs.wecom), 'secret_ref', 'telegram_bot'],
      ['POST', at('/bindings'), wecom(a.secretRef), 'secret_ref', 'wecom_app'],
      ['POST', at('/bindings'), wecom(refs.llm), 'secret_ref', 'wecom_app'],
    ];
    for (const [method, path, body, field, purpose] of attempts) {
      const res = await api(h.app, method, path, { ...as(), body });
      expect(res.status, `${method} ${path} ${res.text}`).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.message).toContain(field);
      expect(res.body.error.message).toContain(purpose);
      expect(res.body.error.details.fields).toEqual([
        { path: field, message: expect.stringContaining(purpose) },
      ]);
    }
    expect(await snapshotTenant(h.sql, a.tenantId)).toEqual(before);

    // The right purpose is accepted.
    await ok(
      api(h.app, 'POST', at('/model-profiles'), {
        ...as(),
        body: { profile_key: 'llm', ...profile, api_key_secret_ref: refs.llm },
      }),
      201,
    );
  });

  it('is enforced by the database for any writer', async () => {
    const wrongBinding = h.sql`
      insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                   app_id, secret_ref, config_digest, status)
      values (${a.tenantId}, ${newId('cb')}, 'telegram', ${uniqueKey('acct')}, ${sha256Hex(randomBytes(8))},
              ${a.appId}, ${refs.llm}, ${sha256Hex('{}')}, 'draft')`;
    await expect(wrongBinding).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'channel_binding_secret_purpose_check',
    });
    const [binding] = await h.sql<{ binding_id: string }[]>`
      select binding_id from channel_binding where tenant_id = ${a.tenantId} and binding_id = ${a.bindingId}`;
    await expect(
      h.sql`update channel_binding set channel = 'wecom' where tenant_id = ${a.tenantId} and binding_id = ${binding!.binding_id}`,
    ).rejects.toMatchObject({ code: '23514', constraint_name: 'channel_binding_secret_purpose_check' });
    await expect(
      h.sql`update model_profile set api_key_secret_ref = ${a.secretRef}
            where tenant_id = ${a.tenantId} and model_profile_id = ${a.modelProfileId}`,
    ).rejects.toMatchObject({ code: '23514', constraint_name: 'model_profile_api_key_secret_purpose_check' });
    await expect(
      h.sql`insert into model_profile_version (tenant_id, model_profile_id, version, provider, model,
                                               api_key_secret_ref, content_digest)
            values (${a.tenantId}, ${a.modelProfileId}, 99, 'scripted', 'rules', ${refs.wecom}, ${sha256Hex('x')})`,
    ).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'model_profile_version_api_key_secret_purpose_check',
    });
    // The right purpose passes the same trigger.
    await h.sql`update model_profile set api_key_secret_ref = ${refs.llm}
                where tenant_id = ${a.tenantId} and model_profile_id = ${a.modelProfileId}`;
    await h.sql`update model_profile set api_key_secret_ref = null
                where tenant_id = ${a.tenantId} and model_profile_id = ${a.modelProfileId}`;
  });

  it('is immutable', async () => {
    const res = await api(h.app, 'PUT', at('/secrets/llm'), {
      ...as(),
      body: { value: 'sk-new', purpose: 'telegram_bot' },
    });
    expect(res.status).toBe(400);
    await expect(
      h.sql`update secret set purpose = 'telegram_bot' where tenant_id = ${a.tenantId} and secret_ref = ${refs.llm}`,
    ).rejects.toMatchObject({ constraint_name: 'secret_purpose_immutable' });
    const [row] = await h.sql`select purpose, current_version from secret where secret_ref = ${refs.llm}`;
    expect(row).toEqual({ purpose: 'model_api_key', current_version: 1 });
  });

  it("a Telegram secret serving an active binding rotates only to a token of the binding's bot", async () => {
    const versions = async () =>
      (await h.sql`select count(*)::int as n from secret_version where secret_ref = ${a.secretRef}`)[0]!.n;
    const before = await versions();
    const otherBot = `${Number(a.bot.botId) + 7}:${a.bot.botToken.split(':')[1]}`;
    const refused = await api(h.app, 'PUT', at(`/secrets/${a.secretName}`), {
      ...as(),
      body: { value: { bot_token: otherBot, webhook_secret_token: a.bot.webhookSecret } },
    });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.error.code).toBe('conflict');
    expect(refused.text).not.toContain(otherBot);
    expect(await versions()).toBe(before);
    // The same bot's token (here: the same value) rotates.
    const same = await api(h.app, 'PUT', at(`/secrets/${a.secretName}`), {
      ...as(),
      body: { value: { bot_token: a.bot.botToken, webhook_secret_token: a.bot.webhookSecret } },
    });
    expect(same.status, same.text).toBe(200);
    expect(await versions()).toBe(before + 1);
  });

  it('re-validates the shape on rotation; an empty webhook_secret_token is refused', async () => {
    const versions = async (secretRef: string) =>
      (await h.sql`select count(*)::int as n from secret_version where secret_ref = ${secretRef}`)[0]!.n;
    const rotate = (name: string, value: unknown) =>
      api(h.app, 'PUT', at(`/secrets/${name}`), { ...as(), body: { value } });
    const tg = { bot_token: a.bot.botToken, webhook_secret_token: a.bot.webhookSecret };
    const refused: [string, unknown, string][] = [
      ['telegram-bot', { ...tg, webhook_secret_token: '' }, 'value.webhook_secret_token'],
      ['telegram-bot', { ...tg, webhook_secret_token: 'has spaces!' }, 'value.webhook_secret_token'],
      ['telegram-bot', { ...tg, webhook_secret_token: 'a'.repeat(257) }, 'value.webhook_secret_token'],
      ['telegram-bot', { bot_token: a.bot.botToken }, 'value.webhook_secret_token'],
      ['telegram-bot', { ...tg, bot_token: 'not-a-token' }, 'value.bot_token'],
      ['telegram-bot', 'a plain string', 'value'],
      ['wecom', { token: 'tok', encoding_aes_key: 'short', corp_secret: 'cs' }, 'value.encoding_aes_key'],
      ['wecom', { encoding_aes_key: aesKey(), corp_secret: 'cs' }, 'value.token'],
      ['wecom', { token: 'tok', encoding_aes_key: aesKey(), corp_secret: 'has space' }, 'value.corp_secret'],
      ['llm', '   ', 'value'],
      ['llm', { note: 'no key here' }, 'value'],
      ['llm', { api_key: '' }, 'value'],
    ];
    const before = {
      tg: await versions(a.secretRef),
      wecom: await versions(refs.wecom),
      llm: await versions(refs.llm),
    };
    for (const [name, value, path] of refused) {
      const res = await rotate(name, value);
      expect(res.status, `${name} ${JSON.stringify(value)} ${res.text}`).toBe(400);
      expect(res.body.error.details.fields.map((f: Json) => f.path)).toContain(path);
    }
    expect((await rotate('llm', '')).status).toBe(400);
    expect({
      tg: await versions(a.secretRef),
      wecom: await versions(refs.wecom),
      llm: await versions(refs.llm),
    }).toEqual(before);

    // The binding still verifies with its stored webhook secret, and an empty header never does.
    const update = JSON.stringify({
      update_id: 1,
      message: { message_id: 1, date: 0, chat: { id: 1, type: 'private' }, text: 'hi' },
    });
    for (const header of ['', 'x']) {
      const res = await h.app.request(a.webhookPath, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': header },
        body: update,
      });
      expect(res.status).toBe(401);
    }

    // Well-shaped values rotate.
    await ok(rotate('telegram-bot', { ...tg, webhook_secret_token: 'Rotated_token-1' }));
    await ok(rotate('wecom', { token: 'tok2', encoding_aes_key: aesKey(), corp_secret: 'cs2' }));
    await ok(rotate('llm', 'sk-rotated'));
    await ok(rotate('tool', { any: ['shape'] }));
  });
});

// The migration's backfill, on a database of its own migrated up to 0021 with rows written the way
// the schema then allowed (no purpose), then migrated to the head.
describe('migration 0022 backfills purpose from what references each secret', () => {
  const name = `purpose_backfill_${process.pid}_${Date.now().toString(36)}`;
  const suiteUrl = inject('databaseUrl');
  let admin: postgres.Sql;
  let url: string;
  let folder: string;

  beforeAll(async () => {
    admin = postgres(suiteUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    const u = new URL(suiteUrl);
    u.pathname = `/${name}`;
    url = u.toString();
    // The migrations up to 0021, with their journal cut there.
    folder = mkdtempSync(join(tmpdir(), 'switchyard-migrations-'));
    const source = join(import.meta.dirname, '../../db/migrations');
    mkdirSync(join(folder, 'meta'));
    const journal = JSON.parse(readFileSync(join(source, 'meta/_journal.json'), 'utf8'));
    journal.entries = journal.entries.filter((e: { idx: number }) => e.idx <= 21);
    writeFileSync(join(folder, 'meta/_journal.json'), JSON.stringify(journal));
    const kept = new Set(journal.entries.map((e: { tag: string }) => `${e.tag}.sql`));
    for (const f of readdirSync(source)) if (kept.has(f)) copyFileSync(join(source, f), join(folder, f));
  });
  afterAll(async () => {
    await admin?.unsafe(`drop database if exists ${name} with (force)`);
    await admin?.end();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  it('binding kind first, then a model profile, else tool_credential; then NOT NULL', async () => {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await migrate(drizzle({ client: sql }), { migrationsFolder: folder });
      const t = newId('t');
      const app = newId('app');
      const s = {
        telegram: newId('sec'),
        wecom: newId('sec'),
        model: newId('sec'),
        loose: newId('sec'),
        both: newId('sec'),
      };
      await sql.begin(async (tx) => {
        await tx`insert into tenant (tenant_id, tenant_key, display_name) values (${t}, ${uniqueKey('t')}, 'T')`;
        for (const [label, ref] of Object.entries(s)) {
          await tx`insert into secret (tenant_id, secret_ref, name) values (${t}, ${ref}, ${label})`;
        }
        await tx`insert into agent_app (tenant_id, app_id, app_key, display_name) values (${t}, ${app}, 'app', 'App')`;
        const binding = async (channel: string, account: string, secretRef: string) => tx`
          insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                       app_id, secret_ref, config_digest, status)
          values (${t}, ${newId('cb')}, ${channel}, ${account}, ${sha256Hex(randomBytes(8))}, ${app},
                  ${secretRef}, ${contentDigest({})}, 'draft')`;
        await binding('telegram', '111', s.telegram);
        await binding('wecom', 'ww1/1', s.wecom);
        await binding('telegram', '222', s.both);
        for (const [key, ref] of [
          ['model', s.model],
          ['both', s.both],
        ] as const) {
          await tx`insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, base_url,
                                              api_key_secret_ref, content_digest)
                   values (${t}, ${newId('mp')}, ${key}, 'openai_compatible', 'm', 'https://llm.example.test',
                           ${ref}, ${sha256Hex(key)})`;
        }
      });
      await sql.end();

      await runMigrations(url);

      const check = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const rows = await check<{ secret_ref: string; purpose: string }[]>`
          select secret_ref, purpose from secret where tenant_id = ${t}`;
        expect(Object.fromEntries(rows.map((r) => [r.secret_ref, r.purpose]))).toEqual({
          [s.telegram]: 'telegram_bot',
          [s.wecom]: 'wecom_app',
          [s.model]: 'model_api_key',
          [s.loose]: 'tool_credential',
          [s.both]: 'telegram_bot',
        });
        const [column] = await check`
          select is_nullable from information_schema.columns where table_name = 'secret' and column_name = 'purpose'`;
        expect(column).toEqual({ is_nullable: 'NO' });
        await expect(
          check`insert into secret (tenant_id, secret_ref, name) values (${t}, ${newId('sec')}, 'late')`,
        ).rejects.toMatchObject({ code: '23502' });
      } finally {
        await check.end();
      }
    } finally {
      await sql.end().catch(() => undefined);
    }
  });
});
