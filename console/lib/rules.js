// Client-side checks with the API's own rules (api/admin/*.ts zod schemas), so a form says what is
// wrong before it is sent. The API stays the authority: its validation_failed is shown as well.
// Each rule takes the raw input string and returns an error message or null.

export const SLUG = /^[a-z][a-z0-9-]{1,63}$/;
export const CONVERSATION_ID = /^[A-Za-z0-9_-]{1,64}$/;
export const TELEGRAM_BOT_ID = /^[1-9]\d{0,19}$/;
export const CORP_ID = /^[A-Za-z0-9_-]{1,64}$/;
export const CURRENCY = /^[A-Z]{3}$/;
export const SECRET_NAME = /^[a-z][a-z0-9_-]{0,63}$/;

export const slug = (what) => (v) =>
  SLUG.test(v.trim().toLowerCase())
    ? null
    : `${what} must be 2-64 characters of a-z, 0-9 and '-', starting with a letter`;

export const text =
  (what, { min = 0, max, trim = false }) =>
  (v) => {
    const s = trim ? v.trim() : v;
    if (s.length < min)
      return min === 1 ? `${what} must not be blank` : `${what} needs at least ${min} characters`;
    if (max !== undefined && s.length > max) return `${what} must be at most ${max} characters`;
    return null;
  };

export const pattern = (what, re, message) => (v) =>
  re.test(v) ? null : (message ?? `${what} is not valid`);

/** An integer in [min, max]; '' is allowed (null) when `nullable`, else required. */
export const int =
  (what, { min, max, nullable = false }) =>
  (v) => {
    if (v.trim() === '') return nullable ? null : `${what} is required`;
    if (!/^-?\d+$/.test(v.trim())) return `${what} must be a whole number`;
    const n = Number(v);
    if (min !== undefined && n < min) return `${what} must be at least ${min}`;
    if (max !== undefined && n > max) return `${what} must be at most ${max}`;
    return null;
  };

export const number =
  (what, { min, max }) =>
  (v) => {
    if (v.trim() === '' || !Number.isFinite(Number(v))) return `${what} must be a number`;
    const n = Number(v);
    if (n < min || n > max) return `${what} must be between ${min} and ${max}`;
    return null;
  };

export const optional = (rule) => (v) => (v.trim() === '' ? null : rule(v));

/** A JSON value of the given kind ('object' or 'array'); '' allowed when `optional`. */
export const json =
  (what, kind, { optional: opt = false, maxItems } = {}) =>
  (v) => {
    if (v.trim() === '') return opt ? null : `${what} is required`;
    let parsed;
    try {
      parsed = JSON.parse(v);
    } catch {
      return `${what} is not valid JSON`;
    }
    if (kind === 'array' && !Array.isArray(parsed)) return `${what} must be a JSON array`;
    if (kind === 'object' && (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)))
      return `${what} must be a JSON object`;
    if (maxItems !== undefined && parsed.length > maxItems)
      return `${what} may have at most ${maxItems} items`;
    return null;
  };

export const url = (what) => (v) => {
  try {
    const u = new URL(v);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return `${what} must be an http(s) URL`;
    return v.length > 2000 ? `${what} must be at most 2000 characters` : null;
  } catch {
    return `${what} must be an http(s) URL`;
  }
};

/** The first failing rule's message for each field, `{}` when all pass. */
export function check(values, rulesByField) {
  const errors = {};
  for (const [field, rules] of Object.entries(rulesByField)) {
    for (const rule of [rules].flat()) {
      const message = rule(String(values[field] ?? ''));
      if (message) {
        errors[field] = message;
        break;
      }
    }
  }
  return errors;
}

/** The API's limits on tenant fields (api/admin/tenants.ts limitFields). */
export const TENANT_RULES = {
  display_name: text('display_name', { min: 1, max: 200, trim: true }),
  rate_limit_rpm: int('rate_limit_rpm', { min: 0, nullable: true }),
  max_concurrent_executions: int('max_concurrent_executions', { min: 1, nullable: true }),
  monthly_token_budget: int('monthly_token_budget', { min: 0, nullable: true }),
  monthly_spend_limit_minor: int('monthly_spend_limit_minor', { min: 0, nullable: true }),
  billing_currency: optional(
    pattern('billing_currency', CURRENCY, 'billing_currency must be an ISO 4217 code such as EUR'),
  ),
  audit_retention_days: int('audit_retention_days', { min: 1, max: 36500 }),
  trace_sampling_rate: number('trace_sampling_rate', { min: 0, max: 1 }),
};

/** A reason of a transition, discard or decision (1-1000 characters, not blank). */
export const REASON = text('reason', { min: 1, max: 1000, trim: true });

/** Revision limits (api/admin/app-revisions.ts). */
export const REVISION_RULES = {
  system_prompt: text('system_prompt', { max: 100000 }),
  scripted: json('scripted', 'object', { optional: true }),
  tools: json('tools', 'array', { optional: true, maxItems: 64 }),
  max_steps: optional(int('max_steps', { min: 1, max: 100 })),
  max_tokens: optional(int('max_tokens', { min: 1, max: 10000000 })),
  deadline_s: optional(int('deadline_s', { min: 1, max: 86400 })),
};

/**
 * A console message, with the send body's rule (api/admin/console.ts SendBody): 1-4096 characters
 * as typed, and not only whitespace.
 */
export const CHAT_TEXT = (v) =>
  v.trim() === '' ? 'text must not be blank' : text('text', { min: 1, max: 4096 })(v);

/** '' → null, else the number: for nullable integer fields. */
export const intOrNull = (v) => (String(v).trim() === '' ? null : Number(v));
