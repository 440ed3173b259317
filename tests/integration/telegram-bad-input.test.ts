import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant, telegramTextUpdate } from '../helpers/seed';

// Bad input at the Telegram webhook gets a clear 4xx and changes nothing: no session, no message,
// no workflow — whether or not the secret token was right.
describe('Telegram webhook: bad input', () => {
  let h: Harness;
  let t: Awaited<ReturnType<typeof seedTelegramTenant>>;

  beforeAll(async () => {
    h = await createHarness();
    t = await seedTelegramTenant(h.sql, h.secrets, { apiBaseUrl: 'http://127.0.0.1:9' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const rows = async () => {
    const [r] = await h.sql<{ n: number }[]>`
      select (select count(*) from message_event where tenant_id = ${t.tenantId})
           + (select count(*) from session where tenant_id = ${t.tenantId}) as n`;
    return Number(r!.n);
  };
  const post = (body: string, headers: Record<string, string> = {}) =>
    h.app.request(`/v1/webhooks/telegram/${t.routeKey}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-telegram-bot-api-secret-token': t.webhookSecret,
        ...headers,
      },
      body,
    });

  it('malformed JSON, a non-Update body, a wrong content type and an oversized body are refused with clear codes', async () => {
    const cases: [string, Record<string, string>, number, string][] = [
      ['{"update_id": 1, "message": ', {}, 400, 'validation_failed'],
      ['{"update_id": "one"}', {}, 400, 'validation_failed'],
      ['[]', {}, 400, 'validation_failed'],
      [
        JSON.stringify(telegramTextUpdate({ chatId: 1, text: 'x' })),
        { 'content-type': 'text/plain' },
        415,
        'unsupported_media_type',
      ],
      [
        JSON.stringify({ update_id: 1, message: { text: 'x'.repeat(1_100_000) } }),
        {},
        413,
        'payload_too_large',
      ],
    ];
    for (const [body, headers, status, code] of cases) {
      const res = await post(body, headers);
      expect(res.status, body.slice(0, 40)).toBe(status);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(code);
    }
    expect(await rows()).toBe(0);
  });

  it('fuzzed bodies and secret tokens never cause a 5xx, and never a row unless the update is valid and verified', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string(), fc.json(), fc.constant('{}')),
        fc.oneof(fc.constant(t.webhookSecret), fc.string({ maxLength: 80 })),
        async (body, secret) => {
          const before = await rows();
          const res = await post(body, { 'x-telegram-bot-api-secret-token': secret });
          expect(res.status).toBeLessThan(500);
          if (secret !== t.webhookSecret) expect(res.status).toBe(401);
          expect(await rows()).toBe(before);
        },
      ),
      { numRuns: 150, seed: 42 },
    );
  });
});
