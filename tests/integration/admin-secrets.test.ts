import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import {
  api,
  createTenant,
  newTelegramBot,
  ok,
  type RequestApp,
  snapshotTenant,
  tenantPath,
} from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';

// Secrets are write-only. With distinctive plaintexts, every response body, every log line (at
// trace level, WITHOUT the production logger's redaction, so nothing relies on it) and every row
// the tenant owns — audit entries included — is searched: the plaintext appears nowhere, also
// when a request carrying it fails.
describe('admin API: secrets never leak', () => {
  let h: Harness;
  let app: RequestApp;
  const logLines: string[] = [];
  const bodies: string[] = [];

  beforeAll(async () => {
    h = await createHarness();
    const sink = new Writable({
      write(chunk, _enc, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    const inner = newApp({ ...h.appDeps, log: pino({ level: 'trace' }, sink) });
    // Every response body of this test run is captured, whatever the route.
    app = {
      async request(path, init) {
        const res = await inner.request(path, init);
        bodies.push(await res.clone().text());
        return res;
      },
    };
  });
  afterAll(async () => {
    await h?.close();
  });

  it('keeps plaintexts out of responses, logs, errors and audit entries', async () => {
    const tenant = await createTenant(app);
    const t = tenant.tenant_id as string;
    const key = await ok(
      api(app, 'POST', tenantPath(t, '/api-keys'), { body: { role: 'tenant_admin' } }),
      201,
    );
    const as = { token: key.key as string };
    const at = (rest: string) => tenantPath(t, rest);

    const plainString = `PLAINTEXT-STRING-${randomBytes(12).toString('hex')}`;
    const plainNested = `PLAINTEXT-NESTED-${randomBytes(12).toString('hex')}`;
    const plainRotated = `PLAINTEXT-ROTATED-${randomBytes(12).toString('hex')}`;
    const bot = newTelegramBot();
    const plaintexts = [plainString, plainNested, plainRotated, bot.botToken, bot.webhookSecret];

    // Successful writes.
    const s1 = await ok(
      api(app, 'POST', at('/secrets'), {
        ...as,
        body: { name: 'llm-key', purpose: 'model_api_key', value: plainString },
      }),
      201,
    );
    await ok(
      api(app, 'POST', at('/secrets'), {
        ...as,
        body: {
          name: 'nested',
          purpose: 'tool_credential',
          value: { deep: { deeper: [plainNested] }, bot_token: bot.botToken },
        },
      }),
      201,
    );
    await ok(api(app, 'PUT', at('/secrets/llm-key'), { ...as, body: { value: plainRotated } }));
    const tg = await ok(
      api(app, 'POST', at('/secrets'), {
        ...as,
        body: {
          name: 'tg',
          purpose: 'telegram_bot',
          value: { bot_token: bot.botToken, webhook_secret_token: bot.webhookSecret },
        },
      }),
      201,
    );
    await ok(api(app, 'GET', at('/secrets'), as));
    await ok(
      api(app, 'POST', at('/model-profiles'), {
        ...as,
        body: {
          profile_key: 'llm',
          provider: 'openai_compatible',
          model: 'm',
          base_url: 'https://llm.example.test',
          api_key_secret_ref: s1.secret_ref,
        },
      }),
      201,
    );

    // Failing requests that carry a plaintext.
    const body = (name: string, value: unknown, extra: Record<string, unknown> = {}) => ({
      name,
      purpose: 'model_api_key',
      value,
      ...extra,
    });
    const failing: [string, string, unknown, number][] = [
      ['POST', at('/secrets'), body('Bad Name!', plainString), 400],
      ['POST', at('/secrets'), body('llm-key', plainString), 409],
      ['POST', at('/secrets'), body('extra', plainString, { note: plainString }), 400],
      ['POST', at('/secrets'), body('long', `${plainString}${'x'.repeat(70_000)}`), 400],
      ['POST', at('/secrets'), body('typed', [plainString]), 400],
      ['POST', at('/secrets'), body('nopurpose', plainString, { purpose: undefined }), 400],
      ['POST', at('/secrets'), body('badpurpose', plainString, { purpose: plainString }), 400],
      // Wrong shapes for the purpose: refused, and the refusal names fields, never values.
      [
        'POST',
        at('/secrets'),
        body('tg-half', { bot_token: bot.botToken }, { purpose: 'telegram_bot' }),
        400,
      ],
      [
        'POST',
        at('/secrets'),
        body(
          'tg-bad',
          { bot_token: plainString, webhook_secret_token: plainNested },
          { purpose: 'telegram_bot' },
        ),
        400,
      ],
      ['POST', at('/secrets'), body('wc-bad', { corp_secret: plainString }, { purpose: 'wecom_app' }), 400],
      ['POST', at('/secrets'), body('llm-blank', { note: plainString }), 400],
      ['PUT', at('/secrets/tg'), { value: { bot_token: plainString, webhook_secret_token: '' } }, 400],
      ['PUT', at('/secrets/missing'), { value: plainRotated }, 404],
      ['PUT', at('/secrets/llm-key'), { value: plainRotated, version: plainRotated }, 400],
      ['POST', at('/secrets'), body('x', plainString), 401],
    ];
    for (const [method, path, body, status] of failing) {
      const res = await api(app, method, path, { token: status === 401 ? 'wrong-token' : as.token, body });
      expect(res.status, res.text).toBe(status);
    }
    const malformed = await api(app, 'POST', at('/secrets'), {
      ...as,
      rawBody: `{"name":"x","value":"${plainString}"`,
    });
    expect(malformed.status).toBe(400);

    // Activation with the wrong bot id opens the secret in the admin path and refuses: no echo.
    const agent = await ok(
      api(app, 'POST', at('/apps'), { ...as, body: { app_key: 'assistant', display_name: 'A' } }),
      201,
    );
    const mismatch = await api(app, 'POST', at('/bindings'), {
      ...as,
      body: {
        channel: 'telegram',
        provider_account_id: '12345',
        app_id: agent.app_id,
        secret_ref: tg.secret_ref,
        activate: true,
      },
    });
    expect(mismatch.status).toBe(409);
    const shape = await api(app, 'POST', at('/bindings'), {
      ...as,
      body: {
        channel: 'telegram',
        provider_account_id: bot.botId,
        app_id: agent.app_id,
        secret_ref: s1.secret_ref,
        activate: true,
      },
    });
    // A model key is not a Telegram secret: refused by purpose before the value is opened.
    expect(shape.status).toBe(400);
    expect(shape.body.error.details.fields[0].path).toBe('secret_ref');

    const audit = await h.sql`select to_jsonb(a) as row from audit_log a where tenant_id = ${t}`;
    expect(audit.length).toBeGreaterThanOrEqual(6);
    const stored = JSON.stringify(await snapshotTenant(h.sql, t));
    const haystacks = {
      responses: bodies.join('\n'),
      logs: logLines.join(''),
      audit: JSON.stringify(audit),
      rows: stored,
    };
    expect(bodies.length).toBeGreaterThan(15);
    for (const p of plaintexts) {
      for (const [where, text] of Object.entries(haystacks)) {
        expect(text.includes(p), `${where} contains a plaintext`).toBe(false);
      }
    }
  });
});
