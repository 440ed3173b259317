import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CHANNEL_LIMITS,
  MIN_FILL_RATIO,
  measure,
  type SegmentLimit,
  SIMPLE_TEXT,
  segmentText,
} from '../../channels/segment';

const TELEGRAM: SegmentLimit = CHANNEL_LIMITS.telegram;
const WECOM: SegmentLimit = CHANNEL_LIMITS.wecom;
const utf16 = (max: number): SegmentLimit => ({ unit: 'utf16', max });
const utf8 = (max: number): SegmentLimit => ({ unit: 'utf8_bytes', max });

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** Start offset and text of every grapheme cluster of `text`. */
function clusters(text: string): { index: number; segment: string }[] {
  return [...graphemes.segment(text)].map(({ index, segment }) => ({ index, segment }));
}

/** Offsets where segment i + 1 starts. */
function cutOffsets(segments: string[]): number[] {
  const cuts: number[] = [];
  let offset = 0;
  for (const s of segments.slice(0, -1)) {
    offset += s.length;
    cuts.push(offset);
  }
  return cuts;
}

/** The invariants every segmentation must satisfy. */
function expectValidSegmentation(text: string, limit: SegmentLimit, segments: string[]): void {
  if (text.trim() === '') {
    expect(segments).toEqual([]);
    return;
  }
  expect(segments.join('')).toBe(text);
  for (const s of segments) {
    expect(s.length).toBeGreaterThan(0);
    expect(measure(s, limit)).toBeLessThanOrEqual(limit.max);
    expect(LONE_SURROGATE.test(s)).toBe(false);
  }
  // A cut splits a grapheme cluster only when that cluster alone exceeds the limit.
  const all = clusters(text);
  let k = 0;
  for (const cut of cutOffsets(segments)) {
    while (k + 1 < all.length && all[k + 1]!.index <= cut) k++;
    const g = all[k]!;
    if (g.index !== cut) expect(measure(g.segment, limit)).toBeGreaterThan(limit.max);
  }
}

/** Deterministic PRNG (mulberry32) so the fixture text is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FAMILY = '👨‍👩‍👧‍👦';
const FLAGS = ['🇯🇵', '🇺🇸', '🇨🇳', '🇩🇪'];
const EMOJI = [FAMILY, '👩🏽‍💻', '👍🏿', '🏳️‍🌈', '😀', '🎉', ...FLAGS, 'e\u0301', 'n\u0303'];
const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'segment', 'gateway', 'reply', 'Telegram', 'WeCom', 'x'];
const CJK = '你好世界这是一个测试文本用于检查分段功能是否正确处理中文字符和标点';

function mixedReply(targetLength: number, seed: number): string {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const parts: string[] = [];
  let length = 0;
  const add = (s: string) => {
    parts.push(s);
    length += s.length;
  };
  while (length < targetLength) {
    const kind = rand();
    if (kind < 0.15) {
      const lines = 3 + Math.floor(rand() * 40);
      const body = Array.from(
        { length: lines },
        (_, i) => `  const v${i} = "${pick(WORDS)} ${pick(EMOJI)}";`,
      );
      add(`\`\`\`ts\n${body.join('\n')}\n\`\`\`\n\n`);
    } else if (kind < 0.35) {
      let s = '';
      const n = 20 + Math.floor(rand() * 200);
      for (let i = 0; i < n; i++) s += rand() < 0.1 ? pick(['。', '！', '？', '；', '，']) : pick([...CJK]);
      add(`${s}\n\n`);
    } else {
      const sentences = 1 + Math.floor(rand() * 8);
      let p = '';
      for (let i = 0; i < sentences; i++) {
        const words = Array.from({ length: 3 + Math.floor(rand() * 20) }, () =>
          rand() < 0.15 ? pick(EMOJI) : pick(WORDS),
        );
        p += `${words.join(' ')}${pick(['. ', '! ', '? ', '\n'])}`;
      }
      add(`${p}\n\n`);
    }
  }
  return parts
    .join('')
    .slice(0, targetLength)
    .replace(/[\uD800-\uDBFF]$/, 'z');
}

describe('measure', () => {
  it('counts UTF-16 code units and UTF-8 bytes', () => {
    expect(measure(FAMILY, TELEGRAM)).toBe(FAMILY.length);
    expect(measure(FAMILY, WECOM)).toBe(Buffer.byteLength(FAMILY));
    expect(measure('中文', WECOM)).toBe(6);
    expect(measure('é', WECOM)).toBe(2);
    expect(measure('😀', utf16(10))).toBe(2);
    expect(measure('😀', utf8(10))).toBe(4);
  });

  it('matches Buffer.byteLength, including lone surrogates', () => {
    const anyCodeUnit = fc.nat(0xffff).map((c) => String.fromCharCode(c));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: anyCodeUnit }), fc.string({ unit: 'binary' })), (s) => {
        expect(measure(s, WECOM)).toBe(Buffer.byteLength(s, 'utf8'));
        expect(measure(s, TELEGRAM)).toBe(s.length);
      }),
    );
  });
});

describe('segmentText: basics', () => {
  it('exposes the channel limits', () => {
    expect(CHANNEL_LIMITS).toEqual({
      telegram: { unit: 'utf16', max: 4096 },
      wecom: { unit: 'utf8_bytes', max: 2048 },
      console: { unit: 'utf16', max: 4096 },
    });
  });

  it('returns [] for empty or whitespace-only input', () => {
    expect(segmentText('', TELEGRAM)).toEqual([]);
    expect(segmentText(' \n\t\r\n  \u3000', TELEGRAM)).toEqual([]);
    expect(segmentText(' '.repeat(10_000), WECOM)).toEqual([]);
  });

  it('keeps a short text as one segment, unchanged', () => {
    expect(segmentText('  hello  ', TELEGRAM)).toEqual(['  hello  ']);
  });

  it('a text exactly at the limit is one segment; limit + 1 gives two', () => {
    expect(segmentText('a'.repeat(4096), TELEGRAM)).toEqual(['a'.repeat(4096)]);
    const over = segmentText('a'.repeat(4097), TELEGRAM);
    expect(over).toHaveLength(2);
    expect(over.join('')).toBe('a'.repeat(4097));

    const atBytes = '😀'.repeat(512); // 2048 bytes
    expect(segmentText(atBytes, WECOM)).toEqual([atBytes]);
    const overBytes = segmentText(`${atBytes}a`, WECOM);
    expect(overBytes).toHaveLength(2);
    expect(overBytes.join('')).toBe(`${atBytes}a`);

    const cjkAt = `${'中'.repeat(682)}ab`; // 2046 + 2 bytes
    expect(segmentText(cjkAt, WECOM)).toEqual([cjkAt]);
    expect(segmentText(`${cjkAt}c`, WECOM)).toHaveLength(2);
  });

  it('hard-cuts text without any boundary into full windows', () => {
    expect(segmentText('x'.repeat(100), utf16(40))).toEqual(['x'.repeat(40), 'x'.repeat(40), 'x'.repeat(20)]);
  });

  it('is deterministic', () => {
    const text = mixedReply(6000, 7);
    expect(segmentText(text, utf16(500))).toEqual(segmentText(text, utf16(500)));
    expect(segmentText(text, utf8(500))).toEqual(segmentText(text, utf8(500)));
  });

  it('rejects limits that cannot hold every code point', () => {
    expect(() => segmentText('abc', utf8(3))).toThrow(RangeError);
    expect(() => segmentText('abc', utf8(0))).toThrow(RangeError);
    expect(() => segmentText('abc', utf16(1))).toThrow(RangeError);
    expect(() => segmentText('abc', utf16(10.5))).toThrow(RangeError);
    expect(() => segmentText('abc', utf16(Number.NaN))).toThrow(RangeError);
    expect(() => segmentText('abc', { unit: 'bytes', max: 10 } as unknown as SegmentLimit)).toThrow(
      RangeError,
    );
    // Validated up front, even when the text is empty or would fit.
    expect(() => segmentText('', utf8(3))).toThrow(RangeError);
    // The minimum limits work, including 4-byte code points.
    expect(segmentText('😀😀a', utf8(4))).toEqual(['😀', '😀', 'a']);
    expect(segmentText('😀😀a', utf16(2))).toEqual(['😀', '😀', 'a']);
  });
});

describe('segmentText: long replies', () => {
  it('splits a 20,000-character mixed reply for Telegram', { timeout: 30_000 }, () => {
    const text = mixedReply(20_000, 42);
    expect(text.length).toBe(20_000);
    expect(text).toContain(FAMILY);
    expect(text).toContain('🇯🇵');
    expect(text).toContain('```ts');
    expect(text).toMatch(/[\u4e00-\u9fff]/);

    const segments = segmentText(text, TELEGRAM);
    expect(segments.length).toBeGreaterThanOrEqual(5);
    expectValidSegmentation(text, TELEGRAM, segments);
    for (const s of segments) expect(s.length).toBeLessThanOrEqual(4096);
    // Order is kept: each segment is found at the running offset.
    let offset = 0;
    for (const s of segments) {
      expect(text.startsWith(s, offset)).toBe(true);
      offset += s.length;
    }
    expect(offset).toBe(text.length);
    // No grapheme in this text exceeds the limit, so every cut is on a grapheme boundary.
    const starts = new Set(clusters(text).map((g) => g.index));
    for (const cut of cutOffsets(segments)) expect(starts.has(cut)).toBe(true);
    // Every fenced block (all of them fit) is inside a single segment.
    for (const block of text.match(/```ts\n[\s\S]*?\n```\n/g) ?? []) {
      expect(segments.some((s) => s.includes(block))).toBe(true);
    }
  });

  it('splits the same reply for WeCom by UTF-8 bytes', { timeout: 30_000 }, () => {
    const text = mixedReply(20_000, 43);
    const segments = segmentText(text, WECOM);
    expectValidSegmentation(text, WECOM, segments);
    for (const s of segments) expect(Buffer.byteLength(s)).toBeLessThanOrEqual(2048);
  });

  it('splits 10,000 CJK characters for WeCom', () => {
    const rand = rng(1);
    let text = '';
    for (let i = 0; i < 10_000; i++) text += CJK[Math.floor(rand() * CJK.length)];
    const segments = segmentText(text, WECOM);
    expect(segments.join('')).toBe(text);
    for (const s of segments) expect(Buffer.byteLength(s, 'utf8')).toBeLessThanOrEqual(2048);
    // No boundaries at all: hard cuts fill each segment (682 ideographs = 2046 bytes).
    expect(segments.slice(0, -1).every((s) => s.length === 682)).toBe(true);
    expect(segments).toHaveLength(Math.ceil(10_000 / 682));
  });

  it('handles 200,000 characters without any boundary quickly (no quadratic segmentation)', () => {
    const text = '中'.repeat(100_000) + 'x'.repeat(100_000);
    const segments = segmentText(text, WECOM);
    expect(segments.join('')).toBe(text);
    for (const s of segments) expect(Buffer.byteLength(s)).toBeLessThanOrEqual(2048);
    const flags = '🇯🇵🇺🇸'.repeat(10_000); // 80,000 units, regional indicator pairs
    const flagSegments = segmentText(flags, utf16(4097));
    expect(flagSegments.join('')).toBe(flags);
    for (const s of flagSegments) expect(s.length % 4).toBe(0);
  });

  it('cuts CJK prose after 。！？；', () => {
    const sentence = `${'中'.repeat(100)}。`; // 303 bytes
    const text = sentence.repeat(10);
    const segments = segmentText(text, WECOM);
    expect(segments.join('')).toBe(text);
    for (const s of segments.slice(0, -1)) {
      expect(s.endsWith('。')).toBe(true);
      expect(Buffer.byteLength(s)).toBe(303 * 6);
    }
  });
});

describe('segmentText: boundary preference', () => {
  const limit = utf16(60);

  it('prefers a paragraph break over a later line break or sentence end', () => {
    const text =
      'First paragraph is here.\n\nNext line.\nThen a sentence. And more words that overflow the window';
    const [first] = segmentText(text, limit);
    expect(first).toBe('First paragraph is here.\n\n');
  });

  it('prefers a line break over a later sentence end', () => {
    const text = 'Line one without a stop\nLine two. Sentence three goes on and on past the window';
    const [first] = segmentText(text, limit);
    expect(first).toBe('Line one without a stop\n');
  });

  it('prefers a sentence end over a later word boundary', () => {
    const text = 'Alpha beta gamma delta. Epsilon zeta eta theta iota kappa lambda mu nu xi';
    const [first] = segmentText(text, limit);
    expect(first).toBe('Alpha beta gamma delta. ');
  });

  it('recognizes ! and ? and closing quotes as sentence ends', () => {
    expect(segmentText('Is this the first question? Words words words words words words', limit)[0]).toBe(
      'Is this the first question? ',
    );
    expect(segmentText('He said "stop the process now!" and then words words words words', limit)[0]).toBe(
      'He said "stop the process now!" ',
    );
  });

  it('prefers a word boundary over a hard cut', () => {
    const text = `${'a'.repeat(30)} ${'b'.repeat(50)}`;
    expect(segmentText(text, limit)).toEqual([`${'a'.repeat(30)} `, 'b'.repeat(50)]);
  });

  it('hard-cuts at the window end when there is no boundary', () => {
    const text = `${'a'.repeat(100)}`;
    expect(segmentText(text, limit)).toEqual(['a'.repeat(60), 'a'.repeat(40)]);
  });

  it('puts the whole boundary whitespace run at the end of the earlier segment', () => {
    const text = `${'w '.repeat(10)}end.\n\n\n\n${'z'.repeat(60)}`;
    const segments = segmentText(text, limit);
    expect(segments[0]).toBe(`${'w '.repeat(10)}end.\n\n\n\n`);
    expect(segments.join('')).toBe(text);
  });

  it(`ignores a stronger boundary in the first ${MIN_FILL_RATIO * 100}% of the window`, () => {
    // "\n\n" after 5 chars (< 15 of 60) is skipped in favour of the later line break.
    const text = `Hi!\n\n${'w'.repeat(30)}\n${'z'.repeat(60)}`;
    const segments = segmentText(text, limit);
    expect(segments[0]).toBe(`Hi!\n\n${'w'.repeat(30)}\n`);
    // ...and a weak boundary late in the window beats none: word over hard cut.
    const text2 = `Hi!\n\n${'w'.repeat(30)} ${'z'.repeat(60)}`;
    expect(segmentText(text2, limit)[0]).toBe(`Hi!\n\n${'w'.repeat(30)} `);
    // With nothing after it, the early boundary loses to a hard cut at the window end.
    const text3 = `Hi!\n\n${'z'.repeat(100)}`;
    expect(segmentText(text3, limit)[0]).toBe(`Hi!\n\n${'z'.repeat(55)}`);
  });

  it('does not split grapheme clusters at a hard cut', () => {
    const text = FAMILY.repeat(10); // 11 code units each
    const segments = segmentText(text, utf16(30));
    expect(segments).toEqual([
      FAMILY.repeat(2),
      FAMILY.repeat(2),
      FAMILY.repeat(2),
      FAMILY.repeat(2),
      FAMILY.repeat(2),
    ]);
    const flags = '🇯🇵🇺🇸🇨🇳'.repeat(4); // 4 units per flag
    for (const s of segmentText(flags, utf16(10))) expect(s.length % 4).toBe(0);
    const accents = 'e\u0301'.repeat(20);
    for (const s of segmentText(accents, utf8(9))) expect(s).toMatch(/^(e\u0301)+$/);
  });

  it('splits a grapheme larger than the limit between code points', () => {
    const segments = segmentText(FAMILY, utf8(8)); // 25 bytes: 4 emoji and 3 ZWJ
    expect(segments.join('')).toBe(FAMILY);
    for (const s of segments) {
      expect(Buffer.byteLength(s)).toBeLessThanOrEqual(8);
      expect(LONE_SURROGATE.test(s)).toBe(false);
    }
    const zalgo = `a${'\u0301'.repeat(40)}`;
    expectValidSegmentation(zalgo, utf16(8), segmentText(zalgo, utf16(8)));
  });
});

describe('segmentText: fenced code blocks', () => {
  const block = '```ts\nconst a = 1;\nconst b = 2;\nconst c = a + b;\n```\n'; // 52 units

  it('moves the cut before a code block that fits in the next segment', () => {
    const intro = 'Here is some introduction text before the code:\n';
    const text = `${intro}${block}After the code. More words follow here.`;
    const limit = utf16(80);
    const segments = segmentText(text, limit);
    expect(segments[0]).toBe(intro);
    expect(segments[1]!.startsWith(block)).toBe(true);
    expectValidSegmentation(text, limit, segments);
  });

  it('cuts right after a code block rather than inside the following prose', () => {
    const text = `${block}Trailing prose with many words in it that will overflow the limit.`;
    const segments = segmentText(text, utf16(70));
    expect(segments[0]).toBe(block);
  });

  it('keeps a fitting block whole even if the text before it is short', () => {
    const text = `Ok:\n${block}${'tail '.repeat(10)}`;
    const segments = segmentText(text, utf16(55)); // 'Ok:\n' + block is 56
    expect(segments[0]).toBe('Ok:\n');
    expect(segments[1]).toBe(block);
  });

  it('does not cut at sentence or word boundaries inside a fitting block', () => {
    const code = '```\nfoo. bar baz\n\nqux. quux corge\n```\n';
    const text = `${'p '.repeat(10)}\n${code}${'q '.repeat(20)}`;
    const segments = segmentText(text, utf16(45));
    expect(segments.some((s) => s.includes(code))).toBe(true);
    expectValidSegmentation(text, utf16(45), segments);
  });

  it('supports ~~~ fences and longer backtick fences', () => {
    const tilde = '~~~\nline one\n```\nstill code\n~~~\n';
    const text = `${'intro words '.repeat(3)}\n${tilde}${'outro '.repeat(10)}`;
    const segments = segmentText(text, utf16(50));
    expect(segments.some((s) => s.includes(tilde))).toBe(true);

    const quad = '````md\n```\ninner\n```\n````\n';
    const text2 = `${'intro words '.repeat(3)}\n${quad}${'outro '.repeat(10)}`;
    const segments2 = segmentText(text2, utf16(50));
    expect(segments2[1]!.startsWith(quad)).toBe(true);
  });

  it('splits an oversize code block on line boundaries', () => {
    const lines = Array.from({ length: 30 }, (_, i) => `line ${String(i).padStart(2, '0')}: x = y + z;`);
    const big = `\`\`\`python\n${lines.join('\n')}\n\`\`\`\n`;
    const text = `Intro.\n\n${big}Done.`;
    const limit = utf16(100);
    const segments = segmentText(text, limit);
    expectValidSegmentation(text, limit, segments);
    expect(segments.length).toBeGreaterThan(5);
    for (const s of segments.slice(0, -1)) expect(s.endsWith('\n')).toBe(true);
    for (const line of lines) expect(segments.some((s) => s.includes(`${line}\n`))).toBe(true);
  });

  it('keeps code lines whole even when that leaves a short segment', () => {
    const big = `\`\`\`\n${'a'.repeat(10)}\n${'b'.repeat(45)}\n${'c'.repeat(45)}\n\`\`\`\n`;
    const segments = segmentText(big, utf16(50));
    expect(segments).toEqual([
      `\`\`\`\n${'a'.repeat(10)}\n`,
      `${'b'.repeat(45)}\n`,
      `${'c'.repeat(45)}\n\`\`\`\n`,
    ]);
  });

  it('hard-cuts a single code line longer than the limit', () => {
    const big = `\`\`\`\n${'x'.repeat(120)}\n\`\`\`\n`;
    const limit = utf16(50);
    const segments = segmentText(big, limit);
    expectValidSegmentation(big, limit, segments);
  });

  it('treats an unclosed fence as running to the end', () => {
    const text = `${'w '.repeat(20)}\n\`\`\`\nunclosed code\nmore code`;
    const segments = segmentText(text, utf16(50));
    expect(segments[0]).toBe(`${'w '.repeat(20)}\n`);
    expect(segments[1]).toBe('```\nunclosed code\nmore code');
  });
});

describe('segmentText: properties', () => {
  const limitArb = fc.oneof(
    fc.integer({ min: 8, max: 64 }).map(utf16),
    fc.integer({ min: 8, max: 64 }).map(utf8),
  );
  const unicodeText = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 200 }),
    fc.string({ unit: 'grapheme-composite', maxLength: 200 }),
    fc.string({ unit: 'binary', maxLength: 300 }),
  );
  const fragment = fc.oneof(
    fc.constantFrom('\n\n', '\n', '\r\n', '. ', '! ', ' ', '  ', '```\n', '```ts\n', '~~~\n', '。', '，'),
    fc.constantFrom(FAMILY, ...FLAGS, '👍🏽', 'e\u0301', '中文', '\u3000'),
    fc.string({ unit: 'grapheme-ascii', maxLength: 12 }),
    fc.string({ unit: 'grapheme', maxLength: 6 }),
  );
  const structuredText = fc.array(fragment, { maxLength: 60 }).map((parts) => parts.join(''));

  it('arbitrary unicode: within limit, non-empty, no lone surrogates, lossless', () => {
    fc.assert(
      fc.property(unicodeText, limitArb, (text, limit) => {
        expectValidSegmentation(text, limit, segmentText(text, limit));
      }),
      { numRuns: 500 },
    );
  });

  it('structured text with fences, breaks and emoji: same invariants', () => {
    fc.assert(
      fc.property(structuredText, limitArb, (text, limit) => {
        expectValidSegmentation(text, limit, segmentText(text, limit));
      }),
      { numRuns: 500 },
    );
  });

  it('long text without whitespace: cuts stay on grapheme boundaries across the whole input', () => {
    const piece = fc.constantFrom(
      'a',
      '中',
      FAMILY,
      ...FLAGS,
      '\u{1F1EF}',
      '👍🏽',
      'e\u0301',
      'ก\u0e31',
      '\u200d',
      '\r\n',
    );
    fc.assert(
      fc.property(
        fc.array(piece, { minLength: 300, maxLength: 1500 }),
        fc.integer({ min: 8, max: 24 }),
        (parts, max) => {
          const text = parts.join('');
          for (const limit of [utf16(max), utf8(max)])
            expectValidSegmentation(text, limit, segmentText(text, limit));
        },
      ),
      { numRuns: 40 },
    );
  });

  it('a code block that fits ends up whole in one segment', () => {
    const codeLine = fc
      .string({ unit: 'grapheme-ascii', maxLength: 10 })
      .map((s) => s.replace(/[`~\n\r]/g, '.'));
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 80 }).map((s) => s.replace(/[`~]/g, '.')),
        fc.array(codeLine, { maxLength: 4 }),
        fc.string({ unit: 'grapheme', maxLength: 80 }).map((s) => s.replace(/[`~]/g, '.')),
        fc.integer({ min: 40, max: 64 }),
        (before, code, after, max) => {
          const limit = utf16(max);
          const block = `\n\`\`\`\n${code.map((l) => `${l}\n`).join('')}\`\`\`\n`;
          const text = `${before}${block}${after}`;
          const segments = segmentText(text, limit);
          expectValidSegmentation(text, limit, segments);
          if (text.trim() !== '' && block.length - 1 <= max) {
            expect(segments.some((s) => s.includes(block.slice(1)))).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('is deterministic for arbitrary input', () => {
    fc.assert(
      fc.property(structuredText, limitArb, (text, limit) => {
        expect(segmentText(text, limit)).toEqual(segmentText(text, limit));
      }),
      { numRuns: 100 },
    );
  });
});

describe('text cut without Intl.Segmenter (SIMPLE_TEXT)', () => {
  // The fast path assumes a grapheme boundary between every two code units of such text; ICU is
  // the judge: every code point of the allowed ranges, between letters and doubled, must come out
  // of Intl.Segmenter as clusters of exactly one code unit, and so must random mixtures.
  const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
  const ranges = [
    ...SIMPLE_TEXT.source.matchAll(/\\u([0-9a-f]{4})-\\u([0-9a-f]{4})|\\x([0-9a-f]{2})-\\x([0-9a-f]{2})/g),
  ].map((m) => [Number.parseInt(m[1] ?? m[3]!, 16), Number.parseInt(m[2] ?? m[4]!, 16)] as const);
  const singleUnits = (text: string) => [...graphemes.segment(text)].every((g) => g.segment.length === 1);

  it('covers the ranges it claims, and nothing that joins', () => {
    expect(ranges.length).toBeGreaterThan(5);
    for (const [from, to] of ranges)
      for (let c = from; c <= to; c++) {
        const ch = String.fromCharCode(c);
        expect(SIMPLE_TEXT.test(ch)).toBe(true);
        if (!singleUnits(`a${ch}${ch}a\n${ch}`)) throw new Error(`U+${c.toString(16)} joins a neighbour`);
      }
    for (const joining of ['\r\n', 'e\u0301', '\u{1f44d}\u{1f3fd}', 'ｶﾞ', 'か\u3099', '\u1100\u1161'])
      expect(SIMPLE_TEXT.test(joining)).toBe(false);
  });

  it('random mixtures of allowed characters are one cluster per code unit and cut losslessly', () => {
    const allowed = fc.oneof(
      ...ranges.map(([from, to]) => fc.integer({ min: from, max: to }).map((c) => String.fromCharCode(c))),
      fc.constantFrom('\n', '\t', ' '),
    );
    fc.assert(
      fc.property(fc.array(allowed, { minLength: 1, maxLength: 300 }), (chars) => {
        const text = chars.join('');
        expect(SIMPLE_TEXT.test(text)).toBe(true);
        expect(singleUnits(text)).toBe(true);
        const parts = segmentText(text, { unit: 'utf16', max: 64 });
        if (text.trim() !== '') expect(parts.join('')).toBe(text);
      }),
      { numRuns: 200 },
    );
  });
});
