// ReDoS benchmark: each case of the corpus (tests/fixtures/redos-corpus.ts) on RE2 (re2js, as tenant
// patterns run, lib/patterns) at the full input cap, beside native RegExp on the longest attack input
// it answers within a budget (it is grown one character at a time from a few, so it terminates).
//   npm run bench:redos
// Then the costliest scripted revisions the caps allow (agents/scripted.ts MAX_RULES_PROGRAM), against
// one MAX_PATTERN_INPUT text, through runScripted. Figures only, no verdict: a number that must
// improve belongs here, not in a timed test.
// "est." extrapolates native's growth per character to the cap: a lower bound for the exponential
// cases, an overstatement for (.*a){12} (polynomial, degree 12: still beyond any timeout).
// Knobs: BENCH_NATIVE_BUDGET_MS (default 100: native stops growing once one run takes longer),
// BENCH_RUNS (default 5: RE2 figures are the median of this many runs).

import { performance } from 'node:perf_hooks';
import { MAX_RULES, MAX_RULES_PROGRAM, runScripted, scriptedConfigSchema } from '../agents/scripted';
import { compilePattern, type LinearPattern, MAX_PATTERN_INPUT, MAX_PATTERN_PROGRAM } from '../lib/patterns';
import { attackInput, REDOS_CORPUS, type RedosCase } from '../tests/fixtures/redos-corpus';

const NATIVE_BUDGET_MS = Number(process.env.BENCH_NATIVE_BUDGET_MS ?? 100);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

function timed<T>(fn: () => T): { ms: number; value: T } {
  const start = performance.now();
  const value = fn();
  return { ms: performance.now() - start, value };
}

function median(fn: () => unknown): number {
  const times = Array.from({ length: RUNS }, () => timed(fn).ms).sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

function mustCompile(source: string): LinearPattern {
  const check = compilePattern(source);
  if (!check.ok) throw new Error(`${source}: ${check.reason}`);
  return check.pattern;
}

/** The program size of a pattern, Infinity when refused. */
function sizeOf(source: string): number {
  const check = compilePattern(source);
  return check.ok ? check.pattern.re2.programSize() : Number.POSITIVE_INFINITY;
}

const fmt = (ms: number) => (ms < 0.01 ? '<0.01' : ms < 10 ? ms.toFixed(2) : ms.toFixed(0));

/**
 * Native RegExp on growing attack inputs until one run takes longer than the budget. `growth` is
 * the time factor per added character over the last 4 (a single step is too noisy).
 */
function nativeUntilBudget(c: RedosCase): { length: number; ms: number; growth: number | null } {
  const re = new RegExp(c.pattern);
  const runs: { length: number; ms: number }[] = [];
  for (let length = Math.max(8, c.tail.length + 1); length <= MAX_PATTERN_INPUT; length++) {
    const { ms } = timed(() => re.test(attackInput(c, length)));
    runs.push({ length, ms });
    if (ms > NATIVE_BUDGET_MS) break;
  }
  const last = runs.at(-1)!;
  const before = runs.at(-5);
  const growth =
    before && before.ms > 0.01 && last.length < MAX_PATTERN_INPUT ? (last.ms / before.ms) ** 0.25 : null;
  return { ...last, growth };
}

/** log10 of the native time at MAX_PATTERN_INPUT, extrapolating the growth per character. */
function estimateLog10(n: { length: number; ms: number; growth: number | null }): string {
  return (Math.log10(n.ms) + (MAX_PATTERN_INPUT - n.length) * Math.log10(n.growth ?? 1)).toFixed(0);
}

function corpus(): void {
  console.log(
    `RE2 (re2js) at ${MAX_PATTERN_INPUT} characters vs native RegExp, grown until one run exceeds ${NATIVE_BUDGET_MS} ms\n`,
  );
  const rows = [
    [
      'pattern',
      'match',
      're2 test ms',
      're2 exec ms',
      'native chars',
      'native ms',
      '×/char',
      `native @${MAX_PATTERN_INPUT} est.`,
    ],
  ];
  for (const c of REDOS_CORPUS) {
    const input = attackInput(c, MAX_PATTERN_INPUT);
    const p = mustCompile(c.pattern);
    const test = median(() => p.test(input));
    const exec = median(() => p.exec(input));
    if (p.test(input) !== c.matches) throw new Error(`${c.pattern}: RE2 disagrees with the corpus`);
    const native = nativeUntilBudget(c);
    rows.push([
      c.pattern,
      String(c.matches),
      fmt(test),
      fmt(exec),
      String(native.length),
      fmt(native.ms),
      native.growth === null ? '-' : native.growth.toFixed(2),
      native.growth === null ? '-' : `10^${estimateLog10(native)} ms`,
    ]);
  }
  printTable(rows);
}

/**
 * The costliest scripted revisions the caps admit, on one attack text of MAX_PATTERN_INPUT: as many
 * rules as MAX_RULES and MAX_RULES_PROGRAM allow, each of a shape that defeats RE2's prefilter and
 * grows its DFA, none matching (so every rule is tested).
 */
function worstRevisions(): void {
  const text = Array.from({ length: MAX_PATTERN_INPUT }, (_, i) => ((i * 7919) % 3 === 0 ? 'a' : 'b')).join(
    '',
  );
  const shapes = [(k: number) => `[ab]*a[ab]{${k}}[cd]$`, (k: number) => `(.*a){${k}}[cd]`];
  console.log(
    `\nWorst revisions: at most ${MAX_RULES} rules, ${MAX_PATTERN_PROGRAM} instructions each, ${MAX_RULES_PROGRAM} together; one text\n`,
  );
  const rows = [['rule', 'rules', 'instructions', 'runScripted ms']];
  for (const shape of shapes) {
    for (const target of [100, 200, MAX_PATTERN_PROGRAM]) {
      // The largest repetition count within `target` instructions.
      let k = 1;
      while (sizeOf(shape(k + 1)) <= target) k++;
      const match = shape(k);
      const size = mustCompile(match).re2.programSize();
      const count = Math.min(MAX_RULES, Math.floor(MAX_RULES_PROGRAM / size));
      const config = scriptedConfigSchema.parse({
        rules: Array.from({ length: count }, () => ({ match, reply: 'never' })),
        default_reply: 'default',
      });
      if (runScripted(config, text).kind !== 'reply') throw new Error('a worst-case rule matched');
      rows.push([match, String(count), `${count} × ${size}`, fmt(median(() => runScripted(config, text)))]);
    }
  }
  printTable(rows);
}

function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows)
    console.log(
      r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '),
    );
}

corpus();
worstRevisions();
