import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { postTelegramText, segmentsOf, waitForFinished } from '../helpers/delivery';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';

const CHATS = [61_001, 61_002, 61_003, 61_004];
const PER_CHAT = 5;
// Longer than the activity's first retry interval (1 s), so ignoring retry_after would show.
const RETRY_AFTER_S = 2;
// Each reply is two segments: a part longer than half a Telegram message, a blank line, another.
const FILLER = 'All work and no play makes a dull bot. '.repeat(80);

// Flood control on real PostgreSQL and Temporal: Telegram answers 429 with retry_after to ~20% of
// the sends; the delivery waits out every penalty (shared by all workers through the database)
// before the next request to that chat, retries, and keeps the chat's order.
describe('Telegram 429 retry_after', () => {
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

  it('4 chats × 5 two-segment replies under 20% 429s: all replied, per-chat order kept, no request during a penalty', async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: {
        rules: [
          {
            match: '^c(\\d+) n(\\d+)$',
            reply: `c{{1}} n{{2}} part 1. ${FILLER}\n\nc{{1}} n{{2}} part 2. ${FILLER}`,
          },
        ],
        default_reply: '?',
      },
    });
    telegram.addBot(t.botToken);
    telegram.failRandomly({
      rate: 0.2,
      fault: { kind: 'rate_limit', retryAfterSeconds: RETRY_AFTER_S },
      seed: 20,
    });

    // One message per chat at a time, so each chat's event order is n = 0, 1, 2…
    for (let n = 0; n < PER_CHAT; n++) {
      const statuses = await Promise.all(CHATS.map((c) => postTelegramText(h, t, c, `c${c} n${n}`)));
      expect(statuses).toEqual(CHATS.map(() => 200));
    }
    const messages = await waitForFinished(h, t.tenantId, CHATS.length * PER_CHAT, 120_000);
    telegram.failRandomly(undefined);

    expect(messages.map((m) => m.status)).toEqual(messages.map(() => 'replied'));
    expect(messages.every((m) => m.segment_count === 2)).toBe(true);
    // The faults really happened, and every one of them was a 429 the delivery had to wait out.
    expect(telegram.faultsByKind.rate_limit).toBeGreaterThanOrEqual(3);
    expect(telegram.violations).toEqual([]);

    for (const c of CHATS) {
      const labels = telegram
        .sentTo(c)
        .map((m) => /^c\d+ n(\d+) part (\d)\./.exec(m.text)?.slice(1).join('.'));
      const expected = Array.from({ length: PER_CHAT }, (_, n) => [`${n}.1`, `${n}.2`]).flat();
      // Every segment exactly once, in event order and segment order.
      expect(labels, `chat ${c}`).toEqual(expected);
      // Paced (~1 s per private chat, give or take the jitter of one send's own latency), never a burst.
      for (const gap of telegram.intervals(c)) expect(gap).toBeGreaterThanOrEqual(700);
    }
    // Each rate-limited chat waited: after a 429 the next request to the chat came after the penalty.
    const rateLimited = telegram.requests.filter((r) => r.fault === 'rate_limit');
    for (const r of rateLimited) {
      const next = telegram.requests.find((q) => q.at > r.at && String(q.chatId) === String(r.chatId));
      if (next) expect(next.at - r.at).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000 - 5);
    }
    const segments = await segmentsOf(h, t.tenantId);
    expect(segments.every((s) => s.status === 'sent')).toBe(true);
    // Retried segments record the extra attempts.
    expect(segments.reduce((n, s) => n + s.attempts, 0)).toBe(segments.length + rateLimited.length);
  }, 150_000);
});
