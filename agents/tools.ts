import { Ajv, type ValidateFunction } from 'ajv';
import { z } from 'zod';
import { contentDigest } from '../lib/digest';
import {
  EgressBodyTooLargeError,
  EgressDeniedError,
  EgressRedirectError,
  EgressUnavailableError,
  egressFetch,
} from '../lib/egress';
import {
  jsonPointer,
  patternRefusal,
  schemaPatternProblems,
  schemaRegExp,
  withPatternScope,
} from './schema-patterns';

// Tool definitions of an agent revision (API contract "Tools") and argument validation against
// each tool's JSON Schema. Formats (`format: email`…) are not validated: only structure is.

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const httpUrl = z
  .string()
  .max(2000)
  .refine((v) => {
    try {
      const u = new URL(v);
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      return false;
    }
  }, 'must be an absolute http(s) URL');

/** A tool as stored; toolDefinitionSchema adds the checks a new revision must pass. */
const storedToolSchema = z
  .object({
    name: z.string().regex(TOOL_NAME, 'must match ^[a-zA-Z0-9_-]{1,64}$'),
    description: z.string().max(4000),
    parameters: z
      .record(z.string(), z.unknown())
      .refine((s) => s.type === undefined || s.type === 'object', 'must be a JSON Schema of type object'),
    endpoint_url: httpUrl,
    side_effect: z.boolean(),
    idempotency: z.enum(['provider_key', 'none']),
    /** `{key}` is replaced by the URL-encoded idempotency key. */
    receipt_url: httpUrl.refine((v) => v.includes('{key}'), 'must contain the {key} placeholder').optional(),
    requires_approval: z.boolean().default(false),
    approval_timeout_s: z
      .number()
      .int()
      .min(1)
      .max(30 * 24 * 3600)
      .default(3600),
    reconcile_window_s: z.number().int().min(1).max(86_400).default(120),
  })
  .strict();

export const toolDefinitionSchema = storedToolSchema.superRefine((tool, ctx) => {
  // Here, not on `parameters`, so the message can name the tool; patterns first, so a pattern RE2
  // cannot run is reported where it is rather than as a schema that does not compile.
  const problems = schemaPatternProblems(tool.parameters);
  for (const p of problems) {
    ctx.addIssue({
      code: 'custom',
      path: ['parameters', ...p.path],
      message: `tool ${tool.name}: the pattern at ${jsonPointer(p.path)}: ${p.reason}`,
    });
  }
  if (problems.length === 0 && !compiles(tool.parameters)) {
    ctx.addIssue({ code: 'custom', path: ['parameters'], message: 'must be a valid JSON Schema' });
  }
});

export type ToolDefinition = z.infer<typeof toolDefinitionSchema>;

/** A revision's `tools`: at most 64, names unique. */
export const revisionToolsSchema = z
  .array(toolDefinitionSchema)
  .max(64)
  .refine((ts) => new Set(ts.map((t) => t.name)).size === ts.length, 'tool names must be unique');

/**
 * Parses a stored revision's tools (validated when the revision was created). Their schemas are not
 * compiled again: one a revision stored before patterns ran on RE2 holds (a lookahead, say) fails
 * its own calls' argument checks ("does not compile"), not every turn of the app.
 */
export function parseRevisionTools(raw: unknown): ToolDefinition[] {
  return z.array(storedToolSchema).parse(raw ?? []);
}

export function findTool(tools: readonly ToolDefinition[], name: string): ToolDefinition | null {
  return tools.find((t) => t.name === name) ?? null;
}

/** Identifies exactly what was allowed to run (stored as tool_invocation.tool_capability_digest). */
export function toolCapabilityDigest(tool: ToolDefinition): string {
  return contentDigest(tool);
}

/** What a model is told about a tool. */
export function toolForModel(tool: ToolDefinition): {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
} {
  return { name: tool.name, description: tool.description, parameters: tool.parameters };
}

// One Ajv instance per process; compiled validators are cached by the schema's content digest, so a
// tool is compiled once however many revisions or calls use it. Patterns run on RE2 (schema-patterns).
const ajv = new Ajv({
  strict: false,
  allErrors: true,
  validateFormats: false,
  logger: false,
  code: { regExp: schemaRegExp },
});
const compiled = new Map<string, ValidateFunction>();
const MAX_CACHED = 1000;

/** `$schema` is dropped: a 2019-09/2020-12 URI is not loaded in the default (draft-07) instance. */
function normalized(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = schema;
  return rest;
}

function validatorFor(schema: Record<string, unknown>): ValidateFunction {
  const key = contentDigest(schema);
  let fn = compiled.get(key);
  if (!fn) {
    fn = ajv.compile(normalized(schema));
    if (compiled.size >= MAX_CACHED) compiled.clear();
    compiled.set(key, fn);
  }
  return fn;
}

function compiles(schema: Record<string, unknown>): boolean {
  try {
    validatorFor(schema);
    return true;
  } catch {
    return false;
  }
}

export type ArgumentCheck = { ok: true } | { ok: false; errors: string[] };

/** Arguments must be a JSON object that satisfies the tool's `parameters` schema. */
export function validateToolArguments(
  tool: Pick<ToolDefinition, 'parameters'>,
  args: unknown,
): ArgumentCheck {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    return { ok: false, errors: ['arguments must be a JSON object'] };
  }
  let validate: ValidateFunction;
  try {
    validate = validatorFor(tool.parameters);
  } catch (err) {
    return { ok: false, errors: [`tool parameters schema does not compile: ${(err as Error).message}`] };
  }
  try {
    if (withPatternScope(() => validate(args))) return { ok: true };
  } catch (err) {
    // A string a pattern would check is longer than the engine's input cap (or all of them together
    // exceed the validation's budget): refused, not judged on its first MAX_PATTERN_INPUT characters
    // (`^[a-z]+$` would pass whatever follows the cut) and not let through (a `patternProperties`
    // name that matches nothing escapes its schema).
    const refusal = patternRefusal(err);
    if (refusal === null) throw err;
    return { ok: false, errors: [refusal] };
  }
  const errors = (validate.errors ?? []).slice(0, 20).map((e) => {
    const at = e.instancePath === '' ? '(root)' : e.instancePath;
    return `${at} ${e.message ?? 'is invalid'}`;
  });
  return { ok: false, errors: errors.length > 0 ? errors : ['arguments are invalid'] };
}

// ---------------------------------------------------------------------------------------------
// The tool provider protocol (API contract "Tools"): POST endpoint_url with an Idempotency-Key and
// the arguments as the JSON body; GET receipt_url ({key} filled in) to reconcile an unknown outcome.
// ---------------------------------------------------------------------------------------------

export type DispatchResult =
  /** 2xx: the provider applied the call; `body` is its receipt and the model's result */
  | { kind: 'accepted'; httpStatus: number; body: unknown }
  /** 4xx (but 408/429): the provider refused the call; nothing was applied */
  | { kind: 'rejected'; httpStatus: number; body: unknown }
  /** the request certainly did not take effect (no connection, or 429): safe to send again */
  | { kind: 'not_sent'; reason: string; retryAfterMs?: number }
  /** 5xx, 408, timeout, dropped connection: it may or may not have been applied */
  | { kind: 'unknown'; reason: string };

export type ReceiptResult =
  | { kind: 'found'; receipt: unknown }
  /** 404: the provider never accepted this key */
  | { kind: 'not_found' }
  | { kind: 'error'; reason: string };

const MAX_BODY_CHARS = 64_000;

/**
 * Caps on what a tool provider's answer may hold. The answer becomes the model's tool result and
 * the stored receipt, and only MAX_BODY_CHARS of it are ever parsed; 1 MiB leaves a provider room
 * to pad or pretty-print while bounding what one call holds in memory (calls run concurrently).
 */
const TOOL_MAX_RESPONSE_BYTES = 1024 * 1024;
const RECEIPT_MAX_RESPONSE_BYTES = 1024 * 1024;

export async function dispatchToolCall(p: {
  url: string;
  idempotencyKey: string;
  args: Record<string, unknown>;
  timeoutMs: number;
}): Promise<DispatchResult> {
  let res: Response;
  let text: string;
  try {
    res = await egressFetch(p.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'idempotency-key': p.idempotencyKey,
      },
      body: JSON.stringify(p.args),
      signal: AbortSignal.timeout(p.timeoutMs),
      maxResponseBytes: TOOL_MAX_RESPONSE_BYTES,
    });
    text = await res.text();
  } catch (err) {
    // Refused by policy before any byte left: a rejection the model is told about, never retried.
    if (err instanceof EgressDeniedError) {
      return { kind: 'rejected', httpStatus: 0, body: { error: 'egress_denied', message: err.message } };
    }
    // A redirect is never followed; but the POST reached a server that may have applied it (a 303
    // See Other usually means it did): an unknown outcome, reconciled by its key, never resent blindly.
    if (err instanceof EgressRedirectError) return { kind: 'unknown', reason: 'redirect_refused' };
    // No address or no connection (a DNS hiccup included): nothing reached the provider.
    if (err instanceof EgressUnavailableError) return { kind: 'not_sent', reason: 'egress_unavailable' };
    // The provider got the call and answered past the cap (whatever its status): it may have
    // applied it, and its answer is lost. Unknown, settled by the receipt for its key.
    if (err instanceof EgressBodyTooLargeError) return { kind: 'unknown', reason: 'response_too_large' };
    return { kind: 'unknown', reason: failureReason(err) };
  }
  const body = parseJson(text);
  const status = res.status;
  if (status >= 200 && status < 300) {
    return {
      kind: 'accepted',
      httpStatus: status,
      body: body.ok ? body.value : { http_status: status, text: text.slice(0, 2000) },
    };
  }
  if (status === 429) {
    const seconds = Number(res.headers.get('retry-after'));
    return {
      kind: 'not_sent',
      reason: 'http_429',
      ...(Number.isFinite(seconds) && seconds >= 0 ? { retryAfterMs: Math.min(seconds, 600) * 1000 } : {}),
    };
  }
  if (status === 408 || status >= 500) return { kind: 'unknown', reason: `http_${status}` };
  return {
    kind: 'rejected',
    httpStatus: status,
    body: body.ok ? body.value : { error: `http_${status}`, text: text.slice(0, 2000) },
  };
}

export async function fetchToolReceipt(p: {
  receiptUrlTemplate: string;
  idempotencyKey: string;
  timeoutMs: number;
}): Promise<ReceiptResult> {
  const url = p.receiptUrlTemplate.split('{key}').join(encodeURIComponent(p.idempotencyKey));
  try {
    const res = await egressFetch(url, {
      method: 'GET',
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(p.timeoutMs),
      maxResponseBytes: RECEIPT_MAX_RESPONSE_BYTES,
    });
    const text = await res.text();
    if (res.status === 404) return { kind: 'not_found' };
    if (res.status !== 200) return { kind: 'error', reason: `receipt_http_${res.status}` };
    const body = parseJson(text);
    return body.ok ? { kind: 'found', receipt: body.value } : { kind: 'error', reason: 'receipt_not_json' };
  } catch (err) {
    if (err instanceof EgressDeniedError) return { kind: 'error', reason: 'receipt_egress_denied' };
    if (err instanceof EgressRedirectError) return { kind: 'error', reason: 'receipt_redirect_refused' };
    if (err instanceof EgressUnavailableError) return { kind: 'error', reason: 'receipt_egress_unavailable' };
    if (err instanceof EgressBodyTooLargeError)
      return { kind: 'error', reason: 'receipt_response_too_large' };
    return { kind: 'error', reason: `receipt_${failureReason(err)}` };
  }
}

/** A provider's own reference for a receipt, when its body names one. */
export function receiptRef(body: unknown): string | null {
  if (!body || typeof body !== 'object') return null;
  const b = body as Record<string, unknown>;
  for (const k of ['receipt_id', 'id']) {
    const v = b[k];
    if (typeof v === 'string' && v.length > 0) return v.slice(0, 500);
    if (typeof v === 'number') return String(v);
  }
  return null;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  if (text.length > MAX_BODY_CHARS) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

function errorCode(err: unknown): string | undefined {
  const cause = (err as { cause?: { code?: unknown } } | null)?.cause;
  return typeof cause?.code === 'string' ? cause.code : undefined;
}

function failureReason(err: unknown): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  const code = errorCode(err);
  return code ? `network_${code.toLowerCase()}` : 'connection_dropped';
}
