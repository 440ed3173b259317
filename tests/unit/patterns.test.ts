import { RE2JS } from 're2js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_PATTERN_INPUT_PER_VALIDATION } from '../../agents/schema-patterns';
import { MAX_RULES_PROGRAM, runScripted, scriptedConfigSchema } from '../../agents/scripted';
import { parseRevisionTools, revisionToolsSchema, validateToolArguments } from '../../agents/tools';
import { compilePattern, type LinearPattern, MAX_PATTERN_INPUT } from '../../lib/patterns';
import { attackInput, REDOS_CORPUS } from '../fixtures/redos-corpus';

// Tenant patterns run on RE2 (lib/patterns). The ReDoS corpus below takes a backtracking engine
// exponential time on its attack inputs (bench/redos.ts prints the figures); here each case is
// asserted to be answered by re2js, with the right result. Had any fallen back to native RegExp,
// the test would not return at all.

const long = (unit: string, tail: string) => unit.repeat(MAX_PATTERN_INPUT - tail.length) + tail;
const CORPUS = REDOS_CORPUS.map((c) => ({ ...c, attack: attackInput(c, MAX_PATTERN_INPUT) }));

function compiled(source: string, flags = ''): LinearPattern {
  const check = compilePattern(source, flags);
  if (!check.ok) throw new Error(`${source}: ${check.reason}`);
  return check.pattern;
}

describe('linear-time patterns', () => {
  afterEach(() => vi.restoreAllMocks());

  it('answers every case of the ReDoS corpus on re2js, with the right result', () => {
    for (const { pattern, attack, matches } of CORPUS) {
      const p = compiled(pattern);
      expect(p.engine).toBe('re2js');
      expect(p.re2).toBeInstanceOf(RE2JS);
      expect(p.test(attack), pattern).toBe(matches);
      expect(p.exec(attack) !== null, pattern).toBe(matches);
    }
  });

  it('a scripted rule with a catastrophic pattern answers the attack text', () => {
    const engine = vi.spyOn(RE2JS.prototype, 'test');
    for (const { pattern, attack, matches } of CORPUS) {
      const config = scriptedConfigSchema.parse({
        rules: [
          { match: pattern, reply: 'caught' },
          { match: '^(\\w)', reply: 'starts with {{1}}' },
        ],
      });
      expect(runScripted(config, attack), pattern).toEqual({
        kind: 'reply',
        text: matches ? 'caught' : `starts with ${attack[0]}`,
      });
    }
    expect(engine).toHaveBeenCalledTimes(CORPUS.length * 2 - CORPUS.filter((c) => c.matches).length);
  });

  it('a tool schema pattern is evaluated by re2js: catastrophic ones return, each pattern its own', () => {
    const tools = revisionToolsSchema.parse([
      {
        name: 'lookup',
        description: 'd',
        endpoint_url: 'https://tools.example/lookup',
        side_effect: false,
        idempotency: 'none',
        parameters: {
          type: 'object',
          properties: {
            code: { type: 'string', pattern: '^(a|a)*$' },
            tag: { type: 'string', pattern: '^b+$' },
          },
        },
      },
    ]);
    const tool = tools[0]!;
    const engine = vi.spyOn(RE2JS.prototype, 'test');
    expect(validateToolArguments(tool, { code: long('a', '') })).toEqual({ ok: true });
    const refused = validateToolArguments(tool, { code: long('a', 'b') });
    expect(refused).toMatchObject({ ok: false, errors: ['/code must match pattern "^(a|a)*$"'] });
    // Ajv keys its pattern objects by toString(): two patterns never share one engine.
    expect(validateToolArguments(tool, { code: 'aa', tag: 'aa' })).toMatchObject({
      ok: false,
      errors: ['/tag must match pattern "^b+$"'],
    });
    expect(validateToolArguments(tool, { code: 'aa', tag: 'bb' })).toEqual({ ok: true });
    expect(engine).toHaveBeenCalledTimes(6);
  });

  it('keeps the JavaScript meaning of the flags i, m, s, u and of named groups', () => {
    const cases: [string, string, string][] = [
      ['^hello (\\w+)$', 'i', 'HeLLo World'],
      ['^hi$', 'm', 'x\nhi\ny'],
      ['^hi$', '', 'x\nhi\ny'],
      ['a.b', 's', 'a\nb'],
      ['a.b', '', 'a\nb'],
      ['^\\p{L}+$', 'u', 'héllo'],
      ['\\u{1F600}', 'u', 'smile 😀'],
      ['\\u0041(\\x42)', '', 'xAB'],
      ['(?<word>\\w+)@(?<host>[a-z.]+)', '', 'mail bob@example.org now'],
      ['^(?:(a)|b)c$', '', 'bc'],
      ['[^]x[]?', '', '\nx'],
      ['\\bcat\\b', 'i', 'a CAT sat'],
    ];
    for (const [source, flags, input] of cases) {
      const native = new RegExp(source, flags).exec(input);
      const linear = compiled(source, flags).exec(input);
      expect(linear === null ? null : [...linear], `/${source}/${flags}`).toEqual(
        native === null ? null : [...native],
      );
    }
  });

  it('refuses what RE2 cannot run or would read differently, naming the rule', () => {
    const refused: [string, string | undefined, string][] = [
      ['^(a)\\1$', undefined, 'backreferences'],
      ['(?<x>a)\\k<x>', undefined, 'named backreferences'],
      ['a(?=b)', undefined, 'lookahead'],
      ['a(?!b)', undefined, 'lookahead'],
      ['(?<=a)b', undefined, 'lookbehind'],
      ['(?<!a)b', undefined, 'lookbehind'],
      ['end\\z', undefined, 'means something else in RE2'],
      ['[[:alpha:]]+', undefined, 'POSIX classes'],
      ['\\p{L}+', undefined, 'needs the u flag'],
      ['(.*){200}', undefined, 'too large for the linear-time engine'],
      ['a{1001}', undefined, 'invalid repeat count'],
      ['(', undefined, 'not a valid regular expression: unterminated group'],
      ['a', 'ii', 'a flag is repeated'],
    ];
    for (const [match, flags, reason] of refused) {
      const parsed = scriptedConfigSchema.safeParse({
        rules: [
          { match: '^ok$', reply: 'fine' },
          { match, flags, reply: 'x' },
        ],
      });
      expect(
        parsed.error?.issues.map((i) => i.path),
        match,
      ).toEqual([['rules', 1, flags ? 'flags' : 'match']]);
      const message = parsed.error?.issues[0]?.message ?? '';
      expect(message.startsWith('rules[1]: ') && message.includes(reason), message).toBe(true);
    }
    // Flags JavaScript has but rules do not take (g, y, d, v) fail the field's own check, once.
    for (const flags of ['g', 'y', 'imsuy']) {
      const parsed = scriptedConfigSchema.safeParse({ rules: [{ match: 'a', flags, reply: 'x' }] });
      expect(
        parsed.error?.issues.map((i) => [i.path, i.message]),
        flags,
      ).toEqual([[['rules', 0, 'flags'], 'only the flags i, m, s, u are allowed']]);
    }
    // Every rule is tested against a text: their programs together are capped too.
    const heavy = (n: number) =>
      scriptedConfigSchema.safeParse({
        rules: Array.from({ length: n }, () => ({ match: '(.*a){79}[cd]', reply: 'x' })),
      });
    expect(heavy(25).success).toBe(true);
    expect(heavy(26).error?.issues.map((i) => [i.path, i.message])).toEqual([
      [['rules'], `the rules compile to ${26 * 398} instructions together, at most ${MAX_RULES_PROGRAM}`],
    ]);
    // Characters that only look like the refused constructs are fine.
    for (const match of ['[(?=]x', '\\(?=', '\\\\1', '^(hello|hi)\\b', '(?:a)(?<n>b)', '\\p{L}']) {
      const flags = match === '\\p{L}' ? 'u' : undefined;
      expect(scriptedConfigSchema.safeParse({ rules: [{ match, flags, reply: 'x' }] }).success, match).toBe(
        true,
      );
    }
  });

  it('refuses a tool schema pattern RE2 cannot run, naming the tool and the schema path', () => {
    const tool = (parameters: Record<string, unknown>) => ({
      name: 'lookup',
      description: 'd',
      endpoint_url: 'https://tools.example/lookup',
      side_effect: false,
      idempotency: 'none',
      parameters,
    });
    const parsed = revisionToolsSchema.safeParse([
      tool({ type: 'object', properties: { ok: { type: 'string', pattern: '^a+$' } } }),
      tool({
        type: 'object',
        properties: { code: { type: 'array', items: { type: 'string', pattern: '^(a)\\1$' } } },
        patternProperties: { '^x-(?=y)': { type: 'string' } },
      }),
    ]);
    expect(parsed.success).toBe(false);
    const issues = (parsed.error?.issues ?? []).map((i) => ({ path: i.path, message: i.message }));
    expect(issues).toHaveLength(3);
    expect(issues).toEqual(
      expect.arrayContaining([
        {
          path: [1, 'parameters', 'properties', 'code', 'items', 'pattern'],
          message: expect.stringMatching(
            /^tool lookup: the pattern at \/properties\/code\/items\/pattern: backref/,
          ),
        },
        {
          path: [1, 'parameters', 'patternProperties', '^x-(?=y)'],
          message: expect.stringMatching(
            /^tool lookup: the pattern at \/patternProperties\/\^x-\(\?=y\): lookahead/,
          ),
        },
        { path: [], message: 'tool names must be unique' },
      ]),
    );
    // A property called `pattern`, or `pattern` inside data keywords, is not a pattern.
    const data = revisionToolsSchema.safeParse([
      tool({
        type: 'object',
        properties: { pattern: { type: 'string' } },
        default: { pattern: '(a)\\1' },
        examples: [{ pattern: '(?=x)' }],
      }),
    ]);
    expect(data.success).toBe(true);

    // A revision stored before patterns ran on RE2 still parses; only its calls are refused.
    const [legacy] = parseRevisionTools([
      tool({ type: 'object', properties: { code: { pattern: '^(?=\\d)' } } }),
    ]);
    expect(validateToolArguments(legacy!, { code: '1' })).toEqual({
      ok: false,
      errors: [
        'tool parameters schema does not compile: the pattern cannot run on the linear-time engine: lookahead ((?=…), (?!…)) is not supported',
      ],
    });
  });

  it('caps the input: a long text meets no rule, a long string checked by a pattern is refused', () => {
    const config = scriptedConfigSchema.parse({
      rules: [{ match: '^\\d+$', reply: 'digits', tool_call: { name: 'charge', arguments: { n: '{{0}}' } } }],
      default_reply: 'too long to read',
    });
    const atCap = '1'.repeat(MAX_PATTERN_INPUT);
    expect(runScripted(config, atCap).kind).toBe('tool_call');
    // One character more: the rule would match its first MAX_PATTERN_INPUT characters, so it does
    // not run at all (`$` at the cut would accept whatever follows).
    expect(runScripted(config, `${atCap}1`)).toEqual({ kind: 'reply', text: 'too long to read' });
    expect(runScripted(config, `${atCap}; drop table`)).toEqual({ kind: 'reply', text: 'too long to read' });

    const parameters = {
      type: 'object',
      properties: { code: { type: 'string', pattern: '^[a-z]+$' }, note: { type: 'string' } },
      patternProperties: { '^x-': { type: 'number' } },
    };
    expect(validateToolArguments({ parameters }, { code: 'a'.repeat(MAX_PATTERN_INPUT) })).toEqual({
      ok: true,
    });
    expect(validateToolArguments({ parameters }, { code: `${'a'.repeat(MAX_PATTERN_INPUT)}!` })).toEqual({
      ok: false,
      errors: [`a string checked by a pattern is longer than ${MAX_PATTERN_INPUT} characters`],
    });
    // No pattern checks `note`'s value; a long property name is checked by patternProperties.
    expect(validateToolArguments({ parameters }, { note: 'n'.repeat(10_000) })).toEqual({ ok: true });
    expect(
      validateToolArguments({ parameters }, { [`x-${'k'.repeat(MAX_PATTERN_INPUT)}`]: 'nan' }),
    ).toMatchObject({
      ok: false,
    });

    // All strings of one call together: a pattern under `items` runs once per element.
    const list = {
      type: 'object',
      properties: { codes: { type: 'array', items: { type: 'string', pattern: '^a+$' } } },
    };
    const element = 'a'.repeat(MAX_PATTERN_INPUT);
    const within = MAX_PATTERN_INPUT_PER_VALIDATION / MAX_PATTERN_INPUT;
    expect(validateToolArguments({ parameters: list }, { codes: Array(within).fill(element) })).toEqual({
      ok: true,
    });
    expect(validateToolArguments({ parameters: list }, { codes: Array(within + 1).fill(element) })).toEqual({
      ok: false,
      errors: [
        `the strings checked by patterns exceed ${MAX_PATTERN_INPUT_PER_VALIDATION} characters together`,
      ],
    });
  });
});
