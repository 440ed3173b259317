import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeWecom, startFakeWecom } from '../fakes/wecom';
import {
  alignPieces,
  graphemeBoundaries,
  hasLoneSurrogate,
  postTelegramText,
  postWecomText,
  segmentsOf,
  waitForFinished,
} from '../helpers/delivery';
import { createHarness, type Harness } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';
import { seedWecomTenant } from '../helpers/wecom';

const TELEGRAM_MAX_UTF16 = 4096;
const WECOM_MAX_BYTES = 2048;

/**
 * A 20,000+ UTF-16 unit reply mixing prose, emoji (ZWJ families, skin tones, flags, keycaps), CJK
 * and fenced code: one code block larger than a Telegram message, one long run of ZWJ emoji with
 * no whitespace at all (forces a cut between grapheme clusters), and plenty of paragraphs.
 */
function longMixedReply(): string {
  const emoji = ['👨‍👩‍👧‍👦', '🏳️‍🌈', '👩🏽‍💻', '🇯🇵', '1️⃣', '❤️‍🔥', '🧑🏿‍🤝‍🧑🏻', 'é'];
  const parts: string[] = [];
  let i = 0;
  const para = () =>
    `Paragraph ${i}: the quick brown fox ${emoji[i % emoji.length]} jumps over the lazy dog. ` +
    `中文句子第${i}段，包含标点。これは日本語の文です。한국어 문장도 있습니다! ` +
    `Does it split well? ${emoji[(i + 3) % emoji.length]}${emoji[(i + 5) % emoji.length]} Yes.`;
  for (; i < 40; i++) parts.push(para());
  parts.push(
    `\`\`\`ts\n${Array.from({ length: 160 }, (_, n) => `const line${n} = '${'x'.repeat(20)}'; // 注释 ${n} 🚀`).join('\n')}\n\`\`\``,
  );
  for (; i < 60; i++) parts.push(para());
  parts.push('👨‍👩‍👧‍👦🧑🏿‍🤝‍🧑🏻🏳️‍🌈'.repeat(180));
  parts.push(`\`\`\`\nshort block ${'🙂'.repeat(50)}\n\`\`\``);
  let text = parts.join('\n\n');
  while (text.length < 20_000) {
    text += `\n\n${para()}`;
    i++;
  }
  return text;
}

/** 10,000 CJK characters in sentences (。！？) and clauses (，), with a few emoji and no spaces. */
function longCjkReply(): string {
  const base =
    '天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏闰余成岁律吕调阳云腾致雨露结为霜金生丽水玉出昆冈剑号巨阙珠称夜光果珍李柰菜重芥姜海咸河淡鳞潜羽翔';
  let out = '';
  let n = 0;
  let chars = 0;
  while (chars < 10_000) {
    const len = 7 + (n % 23);
    for (let k = 0; k < len && chars < 10_000; k++) {
      out += base[(n * 7 + k) % base.length];
      chars++;
    }
    out += n % 5 === 4 ? '。' : n % 11 === 10 ? '！🀄' : '，';
    n++;
  }
  return out;
}

// Long replies on real PostgreSQL and Temporal: segments fit the channel limit, never split a
// character, arrive in order, and together are the whole reply.
describe('reply segmentation at the providers', () => {
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

  it('a 20,000-character reply with emoji, CJK and code reaches Telegram whole, in order, each segment ≤ 4096 UTF-16 units', async () => {
    const reply = longMixedReply();
    expect(reply.length).toBeGreaterThanOrEqual(20_000);
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      scripted: { rules: [], default_reply: reply },
    });
    telegram.addBot(t.botToken);
    const chatId = 51_001;
    expect(await postTelegramText(h, t, chatId, 'tell me everything')).toBe(200);

    const [msg] = await waitForFinished(h, t.tenantId, 1, 60_000);
    expect(msg).toMatchObject({ status: 'replied', outcome: null });

    const sent = telegram.sentTo(chatId).map((m) => m.text);
    expect(sent.length).toBeGreaterThanOrEqual(Math.ceil(reply.length / TELEGRAM_MAX_UTF16));
    expect(msg!.segment_count).toBe(sent.length);
    for (const s of sent) {
      expect(s.length).toBeLessThanOrEqual(TELEGRAM_MAX_UTF16);
      expect(s.trim()).not.toBe('');
      expect(hasLoneSurrogate(s)).toBe(false);
    }
    // In order and lossless: the pieces rebuild the reply with only whitespace put back.
    const starts = alignPieces(reply, sent);
    // No cut inside a grapheme cluster (a ZWJ family, a flag, a keycap).
    const boundaries = graphemeBoundaries(reply);
    for (const [k, at] of starts.entries()) {
      expect(boundaries.has(at), `segment ${k} starts inside a grapheme cluster`).toBe(true);
      expect(boundaries.has(at + sent[k]!.length), `segment ${k} ends inside a grapheme cluster`).toBe(true);
    }
    // Each segment was sent once, and the outbox agrees with what arrived.
    const segments = await segmentsOf(h, t.tenantId);
    expect(segments.map((s) => s.status)).toEqual(sent.map(() => 'sent'));
    expect(segments.map((s) => s.content)).toEqual(sent);
    expect(telegram.requests.filter((r) => String(r.chatId) === String(chatId))).toHaveLength(sent.length);
  }, 90_000);

  it('10,000 CJK characters reach WeCom whole, in order, each segment ≤ 2048 UTF-8 bytes', async () => {
    const reply = longCjkReply();
    const w = await seedWecomTenant(h.sql, h.secrets, {
      apiBaseUrl: wecom.url,
      scripted: { rules: [], default_reply: reply },
    });
    wecom.addApp({ corpId: w.corpId, corpSecret: w.corpSecret, agentId: w.agentId });
    expect(await postWecomText(h, w, 'wangwu', '请详细说明')).toBe(200);

    const [msg] = await waitForFinished(h, w.tenantId, 1, 100_000);
    expect(msg).toMatchObject({ status: 'replied', outcome: null });

    const delivered = wecom.deliveredTo('wangwu').map((d) => d.content);
    const totalBytes = Buffer.byteLength(reply, 'utf8');
    expect(totalBytes).toBeGreaterThan(30_000);
    expect(delivered.length).toBeGreaterThanOrEqual(Math.ceil(totalBytes / WECOM_MAX_BYTES));
    expect(msg!.segment_count).toBe(delivered.length);
    for (const d of delivered) {
      expect(Buffer.byteLength(d, 'utf8')).toBeLessThanOrEqual(WECOM_MAX_BYTES);
      expect(hasLoneSurrogate(d)).toBe(false);
    }
    alignPieces(reply, delivered);
    // Preferred boundaries: every cut but possibly the last falls after CJK punctuation.
    const cutAfterPunctuation = delivered.slice(0, -1).filter((d) => /[。！，]$|🀄$/u.test(d)).length;
    expect(cutAfterPunctuation).toBe(delivered.length - 1);
    expect(wecom.duplicatesDelivered).toBe(0);
    const segments = await segmentsOf(h, w.tenantId);
    expect(segments.map((s) => s.content)).toEqual(delivered);
  }, 120_000);
});
