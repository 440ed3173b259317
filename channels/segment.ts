/**
 * Reply segmentation for IM channels.
 *
 * Splits an AI reply into parts that each fit one channel message. The module is pure and
 * deterministic (no I/O, no clock, no randomness, no `Buffer`), so it can also run inside a
 * Temporal workflow sandbox. Grapheme boundaries come from `Intl.Segmenter`, which depends on the
 * runtime's ICU data: the output is stable for a given Node version.
 *
 * Contract of {@link segmentText}:
 * - Lossless: `segmentText(t, l).join('') === t` for every non-blank `t`. Nothing is trimmed or
 *   re-fenced. The whitespace at a cut (the "\n\n", "\n" or " " that was chosen as the boundary)
 *   stays at the END of the earlier segment, so a segment usually ends with whitespace and the
 *   next one starts with content. A segment can still start with whitespace after a hard cut, and
 *   can be whitespace-only if the input has a whitespace run too long to attach to the previous
 *   segment. A caller that trims each segment before sending should skip segments that trim to
 *   empty.
 * - Every segment is non-empty and `measure(segment, limit) <= limit.max`.
 * - A segment edge never splits a code point (no lone surrogate is created) and, unless one
 *   grapheme cluster alone exceeds `max`, never splits a grapheme cluster (ZWJ emoji, flags,
 *   combining marks, CRLF).
 * - Blank input (empty or only whitespace, per `String.prototype.trim`) gives `[]`.
 *
 * Cut rule: while the remaining text does not fit, take the window = the longest prefix of the
 * remainder (ending on a grapheme boundary) that fits. Positions in the window are ranked:
 *   1. paragraph: after a blank line ("\n\n", also "\n \t\r\n"), or at the start/end of a fenced
 *      code block;
 *   2. line: after "\n";
 *   3. sentence: after ". ", "! ", "? " (the whitespace run is included; closing quotes or brackets
 *      between the mark and the space are allowed), or right after CJK "。", "！", "？", "；"
 *      (and any closing brackets/quotes that follow them);
 *   4. word: after whitespace, or after CJK "，" / "、";
 *   5. hard: any grapheme boundary.
 * For ranks 1..4 in order, the last position of that rank or better in the window is taken, but
 * only if it leaves the segment at least a quarter of `max` long ({@link MIN_FILL_RATIO}); this
 * avoids tiny segments when a later, weaker boundary exists. If none qualifies, the cut is the
 * last allowed position in the window (a hard cut at the window end, normally).
 *
 * Fenced code blocks (``` or ~~~, CommonMark style, an unclosed fence runs to the end):
 * - a block that fits within `max` is never cut: positions inside it are not allowed, so the cut
 *   moves before the block (its start is a paragraph-rank position) and the block goes whole into
 *   the next segment;
 * - a block larger than `max` can only be cut after one of its "\n" (sentence/word rules do not
 *   apply inside code). A hard cut inside such a block is used only when the window holds no line
 *   break at all (a single code line longer than `max`). The parts are not re-fenced.
 *
 * A grapheme cluster larger than `max` is cut between its code points. The limit must admit any
 * single code point: `max >= 2` for UTF-16 units, `max >= 4` for UTF-8 bytes; smaller limits throw
 * a RangeError up front.
 */

export type SegmentLimit = { unit: 'utf16'; max: number } | { unit: 'utf8_bytes'; max: number };

export const CHANNEL_LIMITS = {
  telegram: { unit: 'utf16', max: 4096 },
  wecom: { unit: 'utf8_bytes', max: 2048 },
  // No provider limit; the console's own message limit (api/admin/console.ts), so a reply is one
  // segment unless it is longer than any message the console accepts.
  console: { unit: 'utf16', max: 4096 },
} as const satisfies Record<string, SegmentLimit>;

/** A preferred boundary is only used if the segment it ends is at least this fraction of `max`. */
export const MIN_FILL_RATIO = 0.25;

const RANK_PARAGRAPH = 0;
const RANK_LINE = 1;
const RANK_SENTENCE = 2;
const RANK_WORD = 3;
const RANK_HARD = 4;
/** Not a cut position (inside a grapheme cluster, a surrogate pair or a code block that fits). */
const RANK_NONE = 5;

/** Size of `text` in the limit's unit: UTF-16 code units or UTF-8 bytes. */
export function measure(text: string, limit: SegmentLimit): number {
  if (limit.unit === 'utf16') return text.length;
  if (limit.unit === 'utf8_bytes') return utf8Length(text);
  throw new RangeError(`unknown segment unit: ${String((limit as { unit: unknown }).unit)}`);
}

/** UTF-8 byte length, equal to `Buffer.byteLength(text, 'utf8')` (a lone surrogate counts 3, as U+FFFD). */
function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function assertLimit(limit: SegmentLimit): void {
  if (limit === null || typeof limit !== 'object') throw new RangeError('segment limit is required');
  const { unit, max } = limit;
  if (unit !== 'utf16' && unit !== 'utf8_bytes') {
    throw new RangeError(`unknown segment unit: ${String(unit)}`);
  }
  // The smallest limit that fits any single code point: a surrogate pair / a 4-byte sequence.
  const min = unit === 'utf16' ? 2 : 4;
  if (!Number.isSafeInteger(max) || max < min) {
    throw new RangeError(`segment limit max must be an integer >= ${min} for unit ${unit}, got ${max}`);
  }
}

/**
 * Split `text` into segments that each fit `limit`. See the module comment for the exact contract
 * and cut rule. Throws RangeError for an invalid limit.
 */
export function segmentText(text: string, limit: SegmentLimit): string[] {
  assertLimit(limit);
  if (text.trim() === '') return [];
  const { max } = limit;
  const n = text.length;
  const cum = prefixSizes(text, limit.unit);
  if (cum[n]! <= max) return [text];

  const bounds = unitBoundaries(text, limit, cum);
  const rank = new Uint8Array(n + 1).fill(RANK_NONE);
  for (const b of bounds) rank[b] = RANK_HARD;
  rankTextBoundaries(text, rank);
  const oversizeBlock = applyCodeBlocks(text, rank, cum, max);

  const minFill = Math.floor(max * MIN_FILL_RATIO);
  const segments: string[] = [];
  let pos = 0;
  let lo = 0; // index into `bounds` at or before the current position
  while (cum[n]! - cum[pos]! > max) {
    // windowEnd = the largest unit boundary b with size(pos, b) <= max.
    const budget = cum[pos]! + max;
    let hi = bounds.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (cum[bounds[mid]!]! <= budget) lo = mid;
      else hi = mid - 1;
    }
    const windowEnd = bounds[lo]!;

    // Scan the window backwards; best[r] = last position whose rank is r or better.
    const best = [-1, -1, -1, -1, -1];
    for (let p = windowEnd; p > pos; p--) {
      const r = rank[p]!;
      if (r === RANK_NONE) continue;
      for (let level = r; level <= RANK_HARD; level++) if (best[level]! < 0) best[level] = p;
      if (r === RANK_PARAGRAPH && cum[p]! - cum[pos]! >= minFill) break;
    }

    let cut = -1;
    for (let level = RANK_PARAGRAPH; level < RANK_HARD; level++) {
      const p = best[level]!;
      if (p > pos && cum[p]! - cum[pos]! >= minFill) {
        cut = p;
        break;
      }
    }
    if (cut < 0) {
      cut = best[RANK_HARD]!;
      // Inside an oversize code block, any line break beats a mid-line cut, however short.
      if (oversizeBlock[cut] === 1 && text.charCodeAt(cut - 1) !== 0x0a && best[RANK_LINE]! > pos) {
        cut = best[RANK_LINE]!;
      }
    }
    if (cut <= pos) {
      // Unreachable: the window always holds an allowed position. Guard against an endless loop.
      throw new Error('segmentText: no cut position found');
    }
    segments.push(text.slice(pos, cut));
    pos = cut;
  }
  segments.push(text.slice(pos));
  return segments;
}

/** cum[i] = size of text.slice(0, i) at every code point boundary i (mid-pair entries are unused). */
function prefixSizes(text: string, unit: SegmentLimit['unit']): Float64Array {
  const n = text.length;
  const cum = new Float64Array(n + 1);
  if (unit === 'utf16') {
    for (let i = 0; i <= n; i++) cum[i] = i;
    return cum;
  }
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (isHighSurrogate(c) && i + 1 < n && isLowSurrogate(text.charCodeAt(i + 1))) {
      cum[i + 1] = bytes;
      bytes += 4;
      i++;
    } else bytes += 3;
    cum[i + 1] = bytes;
  }
  return cum;
}

type GraphemeSegmenter = { segment(input: string): Iterable<{ index: number; segment: string }> };

let graphemeSegmenter: GraphemeSegmenter | null | undefined;

function getGraphemeSegmenter(): GraphemeSegmenter | null {
  if (graphemeSegmenter === undefined) {
    graphemeSegmenter =
      typeof Intl !== 'undefined' && typeof Intl.Segmenter === 'function'
        ? new Intl.Segmenter(undefined, { granularity: 'grapheme' })
        : null;
  }
  return graphemeSegmenter;
}

/**
 * Sorted cut candidates that never split a code point: grapheme cluster boundaries, plus code
 * point boundaries inside any cluster larger than `max`. Without Intl.Segmenter: code points.
 */
function unitBoundaries(text: string, limit: SegmentLimit, cum: Float64Array): number[] {
  const bounds: number[] = [];
  if (SIMPLE_TEXT.test(text)) {
    // Every code unit is its own grapheme cluster (see SIMPLE_TEXT): no segmenter needed.
    for (let i = 1; i <= text.length; i++) bounds.push(i);
    return bounds;
  }
  const segmenter = getGraphemeSegmenter();
  if (!segmenter) {
    pushCodePointBoundaries(text, 0, text.length, bounds);
    return bounds;
  }
  forEachGrapheme(segmenter, text, (start, end) => {
    if (cum[end]! - cum[start]! > limit.max) pushCodePointBoundaries(text, start, end, bounds);
    else bounds.push(end);
  });
  return bounds;
}

/**
 * Text made only of these characters has a grapheme boundary between every two code units, by
 * UAX #29: none of them is CR, Extend, ZWJ, SpacingMark, Prepend, a regional indicator, a Hangul
 * jamo or a surrogate, and a precomposed Hangul syllable never joins the next syllable. That covers
 * most replies (ASCII and Latin, CJK ideographs, kana, Hangul syllables, CJK and full-width
 * punctuation), which are then cut without Intl.Segmenter — the slow part for long replies.
 */
export const SIMPLE_TEXT =
  /^[\t\n\x20-\x7e\u00a0-\u02ff\u3000-\u3029\u3030-\u303f\u3041-\u3096\u30a0-\u30ff\u4e00-\u9fff\uac00-\ud7a3\uff01-\uff60]*$/;

/** Code units per Intl.Segmenter call; see {@link forEachGrapheme}. */
const GRAPHEME_CHUNK = 1024;

/**
 * Call `visit(start, end)` for every grapheme cluster of `text`, in order.
 *
 * V8's Intl.Segmenter iterates in time quadratic in the input length (seconds for 100k chars), so
 * the text is segmented in chunks. A chunk always starts at a known cluster boundary, where
 * segmentation restarts exactly as in the full text (UAX #29 rules never look back across a
 * boundary), and a boundary inside a chunk depends only on text before it plus one following
 * character, so all boundaries before the chunk's end are exact. The cluster touching the chunk end
 * may be truncated, so it is dropped and the next chunk starts at its beginning. Chunks never end
 * inside a surrogate pair; a chunk holding no complete cluster is grown until it does.
 */
function forEachGrapheme(
  segmenter: GraphemeSegmenter,
  text: string,
  visit: (start: number, end: number) => void,
): void {
  const n = text.length;
  let start = 0;
  let chunk = GRAPHEME_CHUNK;
  while (start < n) {
    let end = Math.min(n, start + chunk);
    if (end < n && isHighSurrogate(text.charCodeAt(end - 1)) && isLowSurrogate(text.charCodeAt(end))) end--;
    let last = start;
    for (const { index, segment } of segmenter.segment(text.slice(start, end))) {
      const graphemeEnd = start + index + segment.length;
      if (graphemeEnd === end && end < n) break; // possibly truncated by the chunk end
      visit(start + index, graphemeEnd);
      last = graphemeEnd;
    }
    if (last === start) {
      chunk *= 2; // one cluster spans the whole chunk: retry with a larger one
      continue;
    }
    chunk = GRAPHEME_CHUNK;
    start = last;
  }
}

function pushCodePointBoundaries(text: string, start: number, end: number, out: number[]): void {
  for (let i = start; i < end; i++) {
    if (isHighSurrogate(text.charCodeAt(i)) && i + 1 < end && isLowSurrogate(text.charCodeAt(i + 1))) i++;
    out.push(i + 1);
  }
}

const SENTENCE_MARKS = new Set(['.', '!', '?']);
const CJK_SENTENCE_MARKS = new Set(['。', '！', '？', '；']);
const CJK_WORD_MARKS = new Set(['，', '、']);
/** Closing quotes/brackets that may follow a sentence mark: `end." Next`, `完了。」次`. */
const CLOSERS = new Set(['"', "'", ')', ']', '}', '”', '’', '」', '』', '）', '】', '》', '〉', '»']);

/** Breaking whitespace other than "\n" (NBSP and other non-breaking spaces are excluded). */
function isBreakingSpace(c: number): boolean {
  return (
    c === 0x20 ||
    c === 0x09 ||
    c === 0x0d ||
    c === 0x0b ||
    c === 0x0c ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x2006) ||
    (c >= 0x2008 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x205f ||
    c === 0x3000
  );
}

/**
 * Improve the rank of allowed positions (rank HARD) that are text boundaries. Position p is the
 * cut between text[p - 1] and text[p].
 */
function rankTextBoundaries(text: string, rank: Uint8Array): void {
  const n = text.length;
  let lineStart = 0;
  let lineBlank = true; // the current line so far holds only breaking whitespace
  let afterSentenceMark = false; // last non-space char (skipping closers) is . ! or ?
  let afterCjkMark = false; // previous chars are a CJK sentence mark followed only by closers
  const improve = (p: number, r: number) => {
    if (rank[p]! !== RANK_NONE && r < rank[p]!) rank[p] = r;
  };
  for (let i = 0; i < n; i++) {
    const code = text.charCodeAt(i);
    const ch = text[i]!;
    const p = i + 1;
    if (code === 0x0a) {
      improve(p, lineBlank && lineStart > 0 ? RANK_PARAGRAPH : RANK_LINE);
      lineStart = p;
      lineBlank = true;
      afterSentenceMark = false;
      afterCjkMark = false;
      continue;
    }
    if (isBreakingSpace(code)) {
      improve(p, afterSentenceMark ? RANK_SENTENCE : RANK_WORD);
      afterCjkMark = false;
      continue;
    }
    lineBlank = false;
    if (CLOSERS.has(ch)) {
      if (afterCjkMark && !CLOSERS.has(text[p] ?? '')) improve(p, RANK_SENTENCE);
      continue; // keep the sentence state of the mark before the closer
    }
    afterSentenceMark = SENTENCE_MARKS.has(ch);
    afterCjkMark = CJK_SENTENCE_MARKS.has(ch);
    if (afterCjkMark) {
      if (!CLOSERS.has(text[p] ?? '')) improve(p, RANK_SENTENCE);
    } else if (CJK_WORD_MARKS.has(ch)) {
      improve(p, RANK_WORD);
    }
  }
}

type Fence = { char: string; length: number };

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t\r]*$/;

/**
 * Find fenced code blocks and restrict cuts inside them. Returns a mask: 1 at positions strictly
 * inside a block larger than `max`.
 */
function applyCodeBlocks(text: string, rank: Uint8Array, cum: Float64Array, max: number): Uint8Array {
  const n = text.length;
  const oversize = new Uint8Array(n + 1);
  const markBlock = (start: number, end: number) => {
    if (rank[start]! !== RANK_NONE) rank[start] = RANK_PARAGRAPH;
    if (rank[end]! !== RANK_NONE) rank[end] = RANK_PARAGRAPH;
    const fits = cum[end]! - cum[start]! <= max;
    for (let p = start + 1; p < end; p++) {
      if (fits) rank[p] = RANK_NONE;
      else {
        oversize[p] = 1;
        if (rank[p]! !== RANK_NONE) rank[p] = text.charCodeAt(p - 1) === 0x0a ? RANK_LINE : RANK_HARD;
      }
    }
  };

  let open: Fence | null = null;
  let blockStart = 0;
  let lineStart = 0;
  while (lineStart < n) {
    const nl = text.indexOf('\n', lineStart);
    const lineEnd = nl < 0 ? n : nl + 1; // includes the "\n"
    const line = text.slice(lineStart, nl < 0 ? n : nl);
    if (open === null) {
      const m = FENCE_OPEN.exec(line);
      const marker = m?.[1];
      // A backtick fence's info string cannot contain a backtick (CommonMark).
      if (marker && !(marker[0] === '`' && m[2]!.includes('`'))) {
        open = { char: marker[0]!, length: marker.length };
        blockStart = lineStart;
      }
    } else {
      const marker = FENCE_CLOSE.exec(line)?.[1];
      if (marker && marker[0] === open.char && marker.length >= open.length) {
        markBlock(blockStart, lineEnd);
        open = null;
      }
    }
    lineStart = lineEnd;
  }
  if (open !== null) markBlock(blockStart, n); // an unclosed fence runs to the end
  return oversize;
}
