import type { CodeOptions } from 'ajv';
import { compilePattern, type LinearPattern, MAX_PATTERN_INPUT, PatternInputTooLong } from '../lib/patterns';

// The `pattern`s (and `patternProperties` names) of tool JSON Schemas: found for the revision check,
// so a refusal names its schema path, and evaluated by Ajv through RE2 (lib/patterns), never native
// RegExp. JSON Schema patterns are ECMA-262 with Ajv's `u` flag.

/** Patterns one tool's `parameters` may hold: each is compiled when the revision is checked. */
export const MAX_SCHEMA_PATTERNS = 100;

export interface SchemaPatternProblem {
  /** Where, from the root of the schema: `['properties', 'code', 'pattern']`. */
  path: (string | number)[];
  reason: string;
}

const SUBSCHEMA = [
  'additionalItems',
  'additionalProperties',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'items',
  'unevaluatedItems',
  'unevaluatedProperties',
  'contentSchema',
];
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];
const SUBSCHEMA_MAPS = [
  'properties',
  'patternProperties',
  'definitions',
  '$defs',
  'dependentSchemas',
  'dependencies',
];

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Every pattern of a schema RE2 cannot run, following the keywords that hold subschemas only (a
 * `pattern` key inside `properties`, `default` or `enum` is data, not a pattern).
 */
export function schemaPatternProblems(schema: Record<string, unknown>): SchemaPatternProblem[] {
  const problems: SchemaPatternProblem[] = [];
  let count = 0;
  const check = (source: string, path: (string | number)[]) => {
    count++;
    if (count === MAX_SCHEMA_PATTERNS + 1) {
      problems.push({ path, reason: `a tool schema may hold at most ${MAX_SCHEMA_PATTERNS} patterns` });
    }
    if (count > MAX_SCHEMA_PATTERNS) return;
    const result = compilePattern(source, 'u');
    if (!result.ok) problems.push({ path, reason: result.reason });
  };
  const walk = (node: unknown, path: (string | number)[]) => {
    if (!isObject(node)) return;
    if (typeof node.pattern === 'string') check(node.pattern, [...path, 'pattern']);
    if (isObject(node.patternProperties)) {
      for (const key of Object.keys(node.patternProperties)) check(key, [...path, 'patternProperties', key]);
    }
    for (const k of SUBSCHEMA) walk(node[k], [...path, k]);
    for (const k of SUBSCHEMA_LISTS) {
      const list = node[k];
      if (!Array.isArray(list)) continue;
      for (const [i, s] of list.entries()) walk(s, [...path, k, i]);
    }
    for (const k of SUBSCHEMA_MAPS) {
      const map = node[k];
      if (isObject(map)) for (const [name, s] of Object.entries(map)) walk(s, [...path, k, name]);
    }
  };
  walk(schema, []);
  return problems;
}

/** A schema path as a JSON Pointer (RFC 6901): `/properties/code/pattern`. */
export function jsonPointer(path: readonly (string | number)[]): string {
  return path.map((p) => `/${String(p).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}

/**
 * Characters patterns may check in one validation, all strings together: a pattern under `items`
 * runs once per element, and each run costs up to input × program size.
 */
export const MAX_PATTERN_INPUT_PER_VALIDATION = 16 * MAX_PATTERN_INPUT;

export class PatternBudgetExceeded extends Error {
  constructor() {
    super(`the strings checked by patterns exceed ${MAX_PATTERN_INPUT_PER_VALIDATION} characters together`);
    this.name = 'PatternBudgetExceeded';
  }
}

/** What to tell the caller when a validation stopped at a cap; null for any other error. */
export function patternRefusal(err: unknown): string | null {
  if (err instanceof PatternInputTooLong) {
    return `a string checked by a pattern is longer than ${MAX_PATTERN_INPUT} characters`;
  }
  if (err instanceof PatternBudgetExceeded) return err.message;
  return null;
}

/**
 * Compiled engines live for one validation only (see withPatternScope): RE2's lazy DFA grows with
 * the inputs it has seen, up to 8 MiB a pattern, and Ajv keeps its pattern objects for as long as
 * the schema stays compiled. Outside a scope every test compiles afresh (and has no budget).
 */
let scope: { engines: Map<string, LinearPattern>; checked: number } | null = null;

/**
 * Runs a (synchronous) Ajv validation with one compiled engine per pattern, dropped afterwards,
 * and MAX_PATTERN_INPUT_PER_VALIDATION for all its pattern tests.
 */
export function withPatternScope<T>(fn: () => T): T {
  const outer = scope;
  scope = { engines: new Map(), checked: 0 };
  try {
    return fn();
  } finally {
    scope = outer;
  }
}

function mustCompile(source: string, flags: string): LinearPattern {
  const result = compilePattern(source, flags);
  if (!result.ok) throw new Error(`the pattern cannot run on the linear-time engine: ${result.reason}`);
  return result.pattern;
}

/**
 * Ajv's `code.regExp`. Ajv identifies a pattern object by its toString() (its scope cache key), so
 * it is the pattern itself, as native RegExp's would be: two patterns must never share one key.
 * test() throws at the caps (patternRefusal; see validateToolArguments).
 */
export const schemaRegExp: NonNullable<CodeOptions['regExp']> = Object.assign(
  (source: string, flags: string) => {
    mustCompile(source, flags);
    const key = `/${source}/${flags}`;
    return {
      test(input: string): boolean {
        if (scope) {
          scope.checked += input.length;
          if (scope.checked > MAX_PATTERN_INPUT_PER_VALIDATION) throw new PatternBudgetExceeded();
        }
        let engine = scope?.engines.get(key);
        if (!engine) {
          engine = mustCompile(source, flags);
          scope?.engines.set(key, engine);
        }
        return engine.test(input);
      },
      toString: () => key,
    };
  },
  // Ajv reads `code` only to generate standalone validation code, which this process never does.
  { code: 'schemaRegExp (agents/schema-patterns.ts)' },
);
