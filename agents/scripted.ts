import { z } from 'zod';

// The deterministic rules agent of the API contract: first rule whose regex matches the trimmed
// text wins; templates use {{text}}, {{1}}… (capture groups) and {{tool_result}}.

export const scriptedRuleSchema = z
  .object({
    match: z.string().min(1).max(1000),
    flags: z
      .string()
      .regex(/^[imsu]*$/, 'only the flags i, m, s, u are allowed')
      .optional(),
    reply: z.string().max(100_000).optional(),
    tool_call: z
      .object({ name: z.string().min(1).max(64), arguments: z.record(z.string(), z.unknown()).default({}) })
      .strict()
      .optional(),
  })
  .strict()
  .refine((r) => r.reply !== undefined || r.tool_call !== undefined, 'a rule needs a reply or a tool_call')
  .refine((r) => isValidRegex(r.match, r.flags), 'match must be a valid regular expression')
  .refine(
    (r) => !hasNestedQuantifier(r.match),
    'match must not repeat a group that itself repeats (e.g. (a+)+): such patterns can take exponential time',
  );

export const scriptedConfigSchema = z
  .object({
    rules: z.array(scriptedRuleSchema).max(100).default([]),
    default_reply: z.string().max(100_000).default('{{text}}'),
  })
  .strict();

export type ScriptedConfig = z.infer<typeof scriptedConfigSchema>;

export type ScriptedStep =
  | { kind: 'reply'; text: string }
  | {
      kind: 'tool_call';
      name: string;
      arguments: Record<string, unknown>;
      replyTemplate: string;
      vars: TemplateVars;
    };

export interface TemplateVars {
  text: string;
  groups: readonly string[];
  tool_result?: string;
}

/**
 * Tenant patterns run on the shared worker against end-user text, synchronously: a pattern that
 * backtracks exponentially would stall every tenant. The classic cause is a quantified group whose
 * body is itself quantified — `(a+)+`, `(\w*)*`, `(x|y+){2,}` — so those are refused up front.
 */
export function hasNestedQuantifier(source: string): boolean {
  const stack: boolean[] = [];
  let quantifiedInside = false;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === '\\') {
      i++;
      continue;
    }
    if (ch === '[') {
      while (i < source.length && source[i] !== ']') i += source[i] === '\\' ? 2 : 1;
      continue;
    }
    if (ch === '(') {
      stack.push(quantifiedInside);
      quantifiedInside = false;
    } else if (ch === ')') {
      const inner = quantifiedInside;
      quantifiedInside = stack.pop() ?? false;
      const next = source[i + 1];
      const groupQuantified = next === '*' || next === '+' || next === '{';
      if (inner && groupQuantified) return true;
      if (inner || groupQuantified) quantifiedInside = true;
    } else if (ch === '*' || ch === '+' || ch === '{') {
      quantifiedInside = true;
    }
  }
  return false;
}

function isValidRegex(source: string, flags?: string): boolean {
  try {
    new RegExp(source, flags);
    return true;
  } catch {
    return false;
  }
}

export function renderTemplate(template: string, vars: TemplateVars): string {
  return template.replace(/\{\{\s*(text|tool_result|\d+)\s*\}\}/g, (_m, name: string) => {
    if (name === 'text') return vars.text;
    if (name === 'tool_result') return vars.tool_result ?? '';
    return vars.groups[Number(name)] ?? '';
  });
}

function renderArgs(value: unknown, vars: TemplateVars): unknown {
  if (typeof value === 'string') return renderTemplate(value, vars);
  if (Array.isArray(value)) return value.map((v) => renderArgs(v, vars));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderArgs(v, vars)]));
  }
  return value;
}

/** Decides the first step for an inbound text: a final reply, or a tool call to make first. */
export function runScripted(config: ScriptedConfig, rawText: string): ScriptedStep {
  const text = rawText.trim();
  for (const rule of config.rules) {
    const m = new RegExp(rule.match, rule.flags).exec(text);
    if (!m) continue;
    const vars: TemplateVars = { text, groups: m.map((g) => g ?? '') };
    if (rule.tool_call) {
      return {
        kind: 'tool_call',
        name: rule.tool_call.name,
        arguments: renderArgs(rule.tool_call.arguments, vars) as Record<string, unknown>,
        replyTemplate: rule.reply ?? '{{tool_result}}',
        vars,
      };
    }
    return { kind: 'reply', text: renderTemplate(rule.reply ?? '', vars) };
  }
  return { kind: 'reply', text: renderTemplate(config.default_reply, { text, groups: [text] }) };
}
