import { z } from 'zod';
import { compilePattern, type LinearPattern, MAX_PATTERN_INPUT } from '../lib/patterns';
import type { AttachmentSpec } from './messages';

// The deterministic rules agent of the API contract: first rule whose regex matches the trimmed
// text wins; templates use {{text}}, {{1}}… (capture groups) and {{tool_result}}. Rules run on the
// linear-time engine of lib/patterns, never on native RegExp.

export const MAX_RULES = 100;
/**
 * Instructions (lib/patterns' program size) all rules of a revision may compile to together. Every
 * rule is tested against the text, so this bounds a message's matching work: the costliest admitted
 * revisions take 30–170 ms at the input cap on two shared cores (`npm run bench:redos`); 100 rules
 * at the per-pattern cap took 300–400 ms.
 */
export const MAX_RULES_PROGRAM = 10_000;

/** The JavaScript flags rules support (lib/patterns maps them to RE2's and refuses repeats). */
const FLAGS = /^[imsu]{0,4}$/;

export const scriptedRuleSchema = z
  .object({
    match: z.string().min(1).max(1000),
    flags: z.string().regex(FLAGS, 'only the flags i, m, s, u are allowed').optional(),
    reply: z.string().max(100_000).optional(),
    tool_call: z
      .object({ name: z.string().min(1).max(64), arguments: z.record(z.string(), z.unknown()).default({}) })
      .strict()
      .optional(),
    /** Sent after the reply's text, each as its own segment; url, caption and file_name are templates. */
    attachments: z
      .array(
        z
          .object({
            url: z.string().min(1).max(2000),
            kind: z.enum(['image', 'file']).optional(),
            file_name: z.string().min(1).max(255).optional(),
            caption: z.string().max(1024).optional(),
          })
          .strict(),
      )
      .max(10)
      .optional(),
  })
  .strict()
  .refine((r) => r.reply !== undefined || r.tool_call !== undefined, 'a rule needs a reply or a tool_call');

/**
 * A stored configuration as the worker reads it: the shape only. A revision stored before the
 * engine changed may hold a rule RE2 refuses; that rule matches nothing (see `compiled`) rather
 * than failing every message of the app.
 */
export const storedScriptedConfigSchema = z
  .object({
    rules: z.array(scriptedRuleSchema).max(MAX_RULES).default([]),
    default_reply: z.string().max(100_000).default('{{text}}'),
  })
  .strict();

/** A configuration being written (revision validation): the shape and every pattern compiled. */
export const scriptedConfigSchema = storedScriptedConfigSchema.superRefine((config, ctx) => {
  // Checked here, not per rule, so the message can name the rule. Too many rules is already an
  // issue: compiling them all would only cost time.
  if (config.rules.length > MAX_RULES) return;
  let program = 0;
  config.rules.forEach((rule, i) => {
    if (rule.flags !== undefined && !FLAGS.test(rule.flags)) return; // an issue of its own already
    const check = compilePattern(rule.match, rule.flags);
    if (check.ok) {
      program += check.pattern.re2.programSize();
      return;
    }
    ctx.addIssue({
      code: 'custom',
      path: ['rules', i, check.field],
      message: `rules[${i}]: ${check.reason}`,
    });
  });
  if (program > MAX_RULES_PROGRAM) {
    ctx.addIssue({
      code: 'custom',
      path: ['rules'],
      message: `the rules compile to ${program} instructions together, at most ${MAX_RULES_PROGRAM}`,
    });
  }
});

export type ScriptedConfig = z.infer<typeof scriptedConfigSchema>;

export type ScriptedStep =
  | { kind: 'reply'; text: string; attachments?: AttachmentSpec[] }
  | {
      kind: 'tool_call';
      name: string;
      arguments: Record<string, unknown>;
      replyTemplate: string;
      vars: TemplateVars;
      /** the rule's attachments, rendered with the tool result once it is known */
      attachmentTemplates?: AttachmentSpec[];
    };

/** A rule's attachments with their templates rendered. */
export function renderAttachments(
  specs: readonly AttachmentSpec[] | undefined,
  vars: TemplateVars,
): AttachmentSpec[] | undefined {
  if (!specs?.length) return undefined;
  return specs.map((a) => ({
    // What the user wrote goes into the URL as data only: it can never choose the host or path.
    url: renderTemplate(a.url, vars, encodeURIComponent),
    ...(a.kind ? { kind: a.kind } : {}),
    ...(a.file_name ? { file_name: renderTemplate(a.file_name, vars) } : {}),
    ...(a.caption ? { caption: renderTemplate(a.caption, vars) } : {}),
  }));
}

export interface TemplateVars {
  text: string;
  groups: readonly string[];
  tool_result?: string;
}

export function renderTemplate(
  template: string,
  vars: TemplateVars,
  encode: (value: string) => string = (v) => v,
): string {
  return template.replace(/\{\{\s*(text|tool_result|\d+)\s*\}\}/g, (_m, name: string) => {
    if (name === 'text') return encode(vars.text);
    if (name === 'tool_result') return encode(vars.tool_result ?? '');
    return encode(vars.groups[Number(name)] ?? '');
  });
}

/**
 * Compiled per call, not cached: RE2's lazy DFA of a pattern keeps what it built (up to 8 MiB), and
 * a process-wide cache of tenant patterns would keep it for every one of them. Compiling is <1 ms
 * at MAX_PATTERN_PROGRAM. A rule the engine refuses (only a revision stored before the engine
 * changed can hold one) matches nothing: it never falls back to native RegExp.
 */
function compiled(source: string, flags?: string): LinearPattern | null {
  const check = compilePattern(source, flags);
  return check.ok ? check.pattern : null;
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
  // A text longer than MAX_PATTERN_INPUT meets no rule and gets the default reply (which calls no
  // tool). Matching its first MAX_PATTERN_INPUT characters instead would lie: `^\d+$` would accept a
  // text whose tail is not digits (`$` matching at the cut), and a refusing rule placed first could
  // be passed by padding the word it looks for beyond the cut.
  const rules = text.length > MAX_PATTERN_INPUT ? [] : config.rules;
  for (const rule of rules) {
    const pattern = compiled(rule.match, rule.flags);
    // test() runs on RE2's DFA; only the winning rule pays for capture groups.
    if (!pattern?.test(text)) continue;
    const m = pattern.exec(text);
    if (!m) continue;
    const vars: TemplateVars = { text, groups: m.map((g) => g ?? '') };
    if (rule.tool_call) {
      return {
        kind: 'tool_call',
        name: rule.tool_call.name,
        arguments: renderArgs(rule.tool_call.arguments, vars) as Record<string, unknown>,
        replyTemplate: rule.reply ?? '{{tool_result}}',
        vars,
        ...(rule.attachments ? { attachmentTemplates: rule.attachments } : {}),
      };
    }
    const attachments = renderAttachments(rule.attachments, vars);
    return {
      kind: 'reply',
      text: renderTemplate(rule.reply ?? '', vars),
      ...(attachments ? { attachments } : {}),
    };
  }
  return { kind: 'reply', text: renderTemplate(config.default_reply, { text, groups: [text] }) };
}
