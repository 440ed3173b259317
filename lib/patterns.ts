import { RE2JS, RE2JSSyntaxException } from 're2js';

// Tenant-written patterns (scripted rules, `pattern`s of tool JSON Schemas) run on the shared worker,
// synchronously, against end-user text. A backtracking engine (native RegExp) can take exponential
// time on `^(a|a)*$`, so they run on RE2 (re2js): time linear in the input, whatever the pattern.
//
// Patterns are written in JavaScript syntax and must stay valid JavaScript; they are translated to
// RE2 syntax and refused when RE2 cannot express them (backreferences, lookaround) or when the two
// dialects would read them differently. Known remaining differences, accepted: RE2's `\s` is ASCII
// whitespace (JavaScript's also covers NBSP and other Unicode spaces), `.` and the `m` flag's line
// ends stop at `\n` only (JavaScript also stops at `\r`, U+2028, U+2029), and RE2 always matches by
// code point (JavaScript without `u` sees the two halves of an astral character).

/**
 * Patterns never run on more than this many UTF-16 code units (a full Telegram message). Work per
 * match is about input × program size, so the two caps together bound the time of one match.
 */
export const MAX_PATTERN_INPUT = 4096;

/**
 * RE2 program size (≈ instructions) a pattern may compile to. Above ~500, RE2's lazy DFA no longer
 * fits its 8 MiB state budget on a MAX_PATTERN_INPUT text and thrashes: a test went from <5 ms to
 * 80–180 ms when this was chosen. Raising MAX_PATTERN_INPUT means lowering this.
 */
export const MAX_PATTERN_PROGRAM = 400;

/** The flags a pattern may carry, with their JavaScript meaning. `u` needs no RE2 flag. */
const FLAGS: Readonly<Record<string, number>> = {
  i: RE2JS.CASE_INSENSITIVE,
  m: RE2JS.MULTILINE,
  s: RE2JS.DOTALL,
  u: 0,
};

export interface LinearPattern {
  readonly engine: 're2js';
  /** As written, in JavaScript syntax. */
  readonly source: string;
  readonly flags: string;
  readonly re2: RE2JS;
  /** Throws PatternInputTooLong above MAX_PATTERN_INPUT: the caller decides what a long input means. */
  test(input: string): boolean;
  /** Like RegExp.prototype.exec: [match, ...groups] with undefined for groups that did not take part. */
  exec(input: string): (string | undefined)[] | null;
}

export type PatternCheck =
  | { ok: true; pattern: LinearPattern }
  | { ok: false; field: 'match' | 'flags'; reason: string };

export class PatternInputTooLong extends Error {
  constructor(readonly length: number) {
    super(`a text of ${length} characters is longer than the ${MAX_PATTERN_INPUT} a pattern runs on`);
    this.name = 'PatternInputTooLong';
  }
}

function guard(input: string): void {
  if (input.length > MAX_PATTERN_INPUT) throw new PatternInputTooLong(input.length);
}

/**
 * Compiles a JavaScript-syntax pattern on RE2, or says why it cannot run there. The reasons
 * describe the construct, never quote the pattern (they are returned to API callers).
 */
export function compilePattern(source: string, flags = ''): PatternCheck {
  let re2Flags = 0;
  for (const f of flags) {
    const bit = FLAGS[f];
    if (bit === undefined)
      return { ok: false, field: 'flags', reason: `the flag ${f} is not supported (allowed: i, m, s, u)` };
    re2Flags |= bit;
  }
  if (new Set(flags).size !== flags.length)
    return { ok: false, field: 'flags', reason: 'a flag is repeated' };
  const unicode = flags.includes('u');

  // Compiled, never run: only to keep every pattern valid JavaScript, as it is documented.
  try {
    new RegExp(source, flags);
  } catch (err) {
    const prefix = `Invalid regular expression: /${source}/${flags}: `;
    const message = (err as Error).message;
    const detail = message.startsWith(prefix) ? `: ${message.slice(prefix.length).toLowerCase()}` : '';
    return { ok: false, field: 'match', reason: `not a valid regular expression${detail}` };
  }

  const divergence = dialectProblem(source, unicode);
  if (divergence) return { ok: false, field: 'match', reason: divergence };

  let re2: RE2JS;
  try {
    re2 = RE2JS.compile(RE2JS.translateRegExp(source), re2Flags);
  } catch (err) {
    const detail = err instanceof RE2JSSyntaxException ? `: ${err.getDescription()}` : '';
    return { ok: false, field: 'match', reason: `the linear-time engine (RE2) cannot compile it${detail}` };
  }
  const size = re2.programSize();
  if (size > MAX_PATTERN_PROGRAM) {
    return {
      ok: false,
      field: 'match',
      reason: `too large for the linear-time engine: ${size} instructions, at most ${MAX_PATTERN_PROGRAM} (lower the repetition counts)`,
    };
  }
  return {
    ok: true,
    pattern: {
      engine: 're2js',
      source,
      flags,
      re2,
      test(input) {
        guard(input);
        return re2.test(input);
      },
      exec(input) {
        guard(input);
        return re2.exec(input) as (string | undefined)[] | null;
      },
    },
  };
}

// Escapes RE2 reads as something else than JavaScript does: in JavaScript (without `u`) these are
// the plain letters, in RE2 bell, start/end of text and quoting.
const RE2_ONLY_ESCAPES = new Set(['a', 'A', 'z', 'Q', 'E']);

/**
 * What RE2 cannot run, or would read differently, in a pattern that is valid JavaScript. Walks the
 * source once, tracking character classes (where `(` and digits mean nothing special).
 */
function dialectProblem(source: string, unicode: boolean): string | null {
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === '\\') {
      const next = source[i + 1] ?? '';
      i++;
      if (!inClass && next >= '1' && next <= '9') return 'backreferences (\\1, \\2, …) are not supported';
      if (!inClass && next === 'k') return 'named backreferences (\\k<name>) are not supported';
      if (RE2_ONLY_ESCAPES.has(next))
        return `\\${next} means something else in RE2; write ${next} without the backslash`;
      if (!unicode && (next === 'p' || next === 'P')) return `\\${next}{…} needs the u flag`;
      if (!unicode && next === 'u' && source[i + 1] === '{') return '\\u{…} needs the u flag';
      if (next === 'c' && !/[a-zA-Z]/.test(source[i + 1] ?? '')) return '\\c must be followed by a letter';
      continue;
    }
    if (inClass) {
      if (ch === ']') inClass = false;
      else if (ch === '[' && /^\[:\^?[a-z]+:\]/.test(source.slice(i, i + 12))) {
        return 'POSIX classes ([:alpha:]) are not JavaScript; use \\w, \\d or a range';
      }
      continue;
    }
    if (ch === '[') {
      inClass = true;
      if (source[i + 1] === '^') i++;
      // `[]` and `[^]` are complete classes in JavaScript (nothing, anything).
      if (source[i + 1] === ']') {
        inClass = false;
        i++;
      }
    } else if (ch === '(' && source[i + 1] === '?') {
      const kind = source.slice(i + 2, i + 4);
      if (kind[0] === '=' || kind[0] === '!') return 'lookahead ((?=…), (?!…)) is not supported';
      if (kind === '<=' || kind === '<!') return 'lookbehind ((?<=…), (?<!…)) is not supported';
    }
  }
  return null;
}
