import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import {
  APICallError,
  EmptyResponseBodyError,
  InvalidPromptError,
  InvalidResponseDataError,
  JSONParseError,
  NoContentGeneratedError,
  TypeValidationError,
} from '@ai-sdk/provider';
import { generateText, jsonSchema, type ModelMessage, RetryError, streamText, type ToolSet, tool } from 'ai';
import {
  cappedEgressFetch,
  EgressBodyTooLargeError,
  EgressDeniedError,
  EgressRedirectError,
  EgressUnavailableError,
  egressErrorOf,
} from '../lib/egress';
import type { TokenUsage, ToolCall, TurnMessage } from './messages';

// The OpenAI-compatible provider ({base_url}/chat/completions): one call, non-streaming or (a
// profile with `stream`) streaming with usage included, no retries (Temporal retries the activity)
// and tools without `execute` (tools are run durably by the tool activities, never by the SDK).
// Both give the same OpenAICallResult only once the answer is complete; a stream that fails or
// ends early is a retryable ModelError, never a partial reply. Every failure becomes a ModelError
// whose message never contains the API key.

/**
 * Cap on a non-streamed answer (the cap wraps the body stream the SDK reads). A completion is at
 * most max_tokens of text: 128k tokens ≈ 512 KiB, up to ~3 MiB once JSON-escaped (\uXXXX for
 * non-ASCII), plus tool-call arguments and logprobs. 8 MiB is well above that, and bounds what one
 * model call holds in memory (bytes, string and parsed object at once) when a base_url answers
 * without end. The SDK's own limit is 2 GiB.
 */
export const MODEL_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
/**
 * Cap on a streamed answer's raw bytes. Server-sent events repeat the chunk envelope (id, object,
 * created, model, choices, logprobs, usage: null) for every token or two, ~200+ bytes a token, so
 * the non-stream cap would cut a streamed answer at ~35k tokens that the same profile without
 * stream gets whole. 64 MiB is ~300k tokens of SSE. The SDK parses the events one by one and never
 * holds the raw body, so memory is bounded by MODEL_MAX_STREAMED_CHARS, not by this cap.
 */
export const MODEL_MAX_STREAM_BYTES = 64 * 1024 * 1024;
/**
 * Cap on what a streamed answer accumulates (text, reasoning and tool-call arguments, in UTF-16
 * units): the non-stream budget, so a stream is held in memory no larger than a non-streamed answer.
 */
export const MODEL_MAX_STREAMED_CHARS = MODEL_MAX_RESPONSE_BYTES;
/**
 * Characters per token of the usage estimate, used only when a stream carries no usage (a provider
 * that ignores stream_options.include_usage, or a stream cut before its usage chunk): the common
 * ~4 characters of English text per token, rounded up. An estimate, never exact; it keeps budgets
 * from counting a billed answer as free.
 */
export const ESTIMATED_CHARS_PER_TOKEN = 4;
const modelFetch = cappedEgressFetch(MODEL_MAX_RESPONSE_BYTES);
const streamFetch = cappedEgressFetch(MODEL_MAX_STREAM_BYTES);

export interface OpenAICallInput {
  baseUrl: string;
  /** Omitted for endpoints without auth (a local vLLM or Ollama). */
  apiKey?: string | null;
  model: string;
  system: string;
  messages: readonly TurnMessage[];
  tools: readonly { name: string; description: string; parameters: Record<string, unknown> }[];
  /** model_profile.parameters: temperature, top_p, …; unknown keys are sent as extra body fields. */
  parameters?: Record<string, unknown>;
  maxTokens?: number;
  timeoutMs: number;
  /** Aborts the HTTP call (the model activity's cancellation). */
  abortSignal?: AbortSignal;
  /** Stream the answer (model_profile.stream); default false. */
  stream?: boolean;
  /**
   * Streaming only: called with the reply text so far each time text arrives (best effort for the
   * caller: what it does must not throw, and it never changes the result).
   */
  onTextDelta?: (textSoFar: string) => void;
}

/**
 * `usageEstimated`: the provider sent no token counts (a stream without its usage chunk): `usage`
 * is estimateUsage's, not the provider's.
 */
export type OpenAICallResult =
  | { kind: 'reply'; text: string; usage: TokenUsage; usageEstimated?: true }
  | { kind: 'tool_calls'; calls: ToolCall[]; usage: TokenUsage; usageEstimated?: true };

/** Tokens of an answer that failed after some of it arrived (the provider bills them). */
export interface PartialUsage extends TokenUsage {
  /** true: estimateUsage's (no usage part came); false: the provider's own counts */
  estimated: boolean;
}

export class ModelError extends Error {
  override readonly name = 'ModelError';
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  /** Low-cardinality class: rate_limited, server_error, timeout, network, malformed_response, … */
  readonly reasonClass: string;
  readonly statusCode?: number;
  /**
   * A streamed call that failed after tokens arrived (dropped, timed out, cancelled, over the cap):
   * what the provider billed for them, for the caller's usage event. Absent: nothing arrived.
   */
  partialUsage?: PartialUsage;

  constructor(p: {
    message: string;
    retryable: boolean;
    reasonClass: string;
    retryAfterMs?: number;
    statusCode?: number;
  }) {
    super(p.message);
    this.retryable = p.retryable;
    this.reasonClass = p.reasonClass;
    if (p.retryAfterMs !== undefined) this.retryAfterMs = p.retryAfterMs;
    if (p.statusCode !== undefined) this.statusCode = p.statusCode;
  }
}

const PROVIDER_NAME = 'switchyard';
/** Body fields a profile's parameters may not override. */
const RESERVED = new Set(['model', 'messages', 'tools', 'tool_choice', 'stream', 'stream_options', 'n']);
const MAX_RETRY_AFTER_MS = 10 * 60_000;

export async function callOpenAICompatible(input: OpenAICallInput): Promise<OpenAICallResult> {
  try {
    const call = callOf(input);
    if (input.stream) return await streamCall(input, call);
    const result = await generateText({
      ...call,
      timeout: input.timeoutMs,
      ...(input.abortSignal ? { abortSignal: input.abortSignal } : {}),
    });
    const usage = tokenUsage(result.usage);
    if (result.toolCalls.length > 0) {
      return {
        kind: 'tool_calls',
        calls: result.toolCalls.map((c) => ({ id: c.toolCallId, name: c.toolName, arguments: c.input })),
        usage,
      };
    }
    return { kind: 'reply', text: result.text, usage };
  } catch (err) {
    throw classifyModelError(err, input.apiKey ?? null);
  }
}

/** What both kinds of call send: the model, the prompt, the tools and the profile's settings. */
function callOf(input: OpenAICallInput) {
  const provider = createOpenAICompatible({
    name: PROVIDER_NAME,
    baseURL: input.baseUrl.replace(/\/+$/, ''),
    fetch: input.stream ? streamFetch : modelFetch,
    // stream_options.include_usage: a streamed answer ends with its token counts (budgets need them).
    includeUsage: true,
    ...(input.apiKey ? { apiKey: input.apiKey } : {}),
  });
  const tools: ToolSet = {};
  for (const t of input.tools) {
    tools[t.name] = tool({ description: t.description, inputSchema: jsonSchema(t.parameters as never) });
  }
  const { settings, extra } = splitParameters(input.parameters ?? {});
  return {
    model: provider.chatModel(input.model),
    system: input.system,
    messages: toModelMessages(input.messages),
    ...(input.tools.length > 0 ? { tools } : {}),
    ...settings,
    ...(input.maxTokens ? { maxOutputTokens: input.maxTokens } : {}),
    ...(Object.keys(extra).length > 0 ? { providerOptions: { [PROVIDER_NAME]: extra as never } } : {}),
    maxRetries: 0,
  };
}

function tokenUsage(u: { inputTokens?: number | undefined; outputTokens?: number | undefined }): TokenUsage {
  return { inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0 };
}

/**
 * The usage estimate (ESTIMATED_CHARS_PER_TOKEN): input from the prompt's text (system, messages,
 * tool calls; a tool result is in its message's content; pictures are not counted), output from the characters that arrived.
 */
export function estimateUsage(
  input: Pick<OpenAICallInput, 'system' | 'messages'>,
  outputChars: number,
): TokenUsage {
  const perToken = (chars: number) => Math.ceil(chars / ESTIMATED_CHARS_PER_TOKEN);
  let promptChars = input.system.length;
  for (const m of input.messages) {
    promptChars += m.content.length;
    if (m.toolCalls?.length) promptChars += JSON.stringify(m.toolCalls).length;
  }
  return { inputTokens: perToken(promptChars), outputTokens: perToken(outputChars) };
}

/**
 * The streaming call: reads the SDK's full stream to its end. The deadline, the caller's abort and
 * our own stop (the accumulated-size cap) are one signal (a timeout or a cancellation ends the
 * stream as an abort); a stream error (a connection dropped mid-answer, an error chunk) is thrown
 * for classifyModelError; a stream that ends without a finish reason was cut short and is never
 * taken as the reply. Usage: the provider's counts when its usage chunk came; otherwise an
 * estimate, flagged (usageEstimated), never a silent 0/0. A failure after tokens arrived carries
 * their usage (ModelError.partialUsage), so the caller can record what the provider billed.
 */
async function streamCall(
  input: OpenAICallInput,
  call: ReturnType<typeof callOf>,
): Promise<OpenAICallResult> {
  const deadline = AbortSignal.timeout(input.timeoutMs);
  const stop = new AbortController();
  const signal = AbortSignal.any([stop.signal, deadline, ...(input.abortSignal ? [input.abortSignal] : [])]);
  const result = streamText({
    ...call,
    abortSignal: signal,
    // Errors arrive as stream parts (below); the default handler would only log them.
    onError: () => undefined,
  });
  let text = '';
  /** everything accumulated so far (text, reasoning, tool-call arguments), in UTF-16 units */
  let chars = 0;
  const calls: ToolCall[] = [];
  let usage: (TokenUsage & { known: boolean }) | null = null;
  let finished = false;
  const aborted = () => {
    const e = new Error(input.abortSignal?.aborted ? 'model call aborted' : 'model call timed out');
    e.name = input.abortSignal?.aborted ? 'AbortError' : 'TimeoutError';
    return e;
  };
  const grow = (n: number) => {
    chars += n;
    if (chars <= MODEL_MAX_STREAMED_CHARS) return;
    throw new ModelError({
      message: `model provider streamed an answer over ${MODEL_MAX_STREAMED_CHARS} characters (not read past it)`,
      retryable: false,
      reasonClass: 'response_too_large',
    });
  };
  try {
    for await (const part of result.fullStream) {
      switch (part.type) {
        case 'text-delta':
          if (part.text === '') break;
          grow(part.text.length);
          text += part.text;
          input.onTextDelta?.(text);
          break;
        case 'reasoning-delta':
          grow(part.text.length);
          break;
        case 'tool-input-delta':
          grow(part.delta.length);
          break;
        case 'tool-call':
          calls.push({ id: part.toolCallId, name: part.toolName, arguments: part.input });
          break;
        case 'finish-step':
          finished = part.rawFinishReason !== undefined || part.finishReason !== 'other';
          break;
        case 'finish': {
          const u = part.totalUsage;
          usage = { ...tokenUsage(u), known: u.inputTokens !== undefined && u.outputTokens !== undefined };
          break;
        }
        case 'error':
          throw part.error;
        case 'abort':
          throw aborted();
        default:
          break;
      }
    }
    if (signal.aborted) throw aborted();
    if (!finished || !usage) {
      throw new ModelError({
        message: 'model provider ended the stream before the answer was complete',
        retryable: true,
        reasonClass: 'stream_interrupted',
      });
    }
  } catch (err) {
    stop.abort();
    const e = classifyModelError(err, input.apiKey ?? null);
    if (chars > 0 || usage) {
      const known: TokenUsage | null = usage?.known ? usage : null;
      e.partialUsage = known
        ? { inputTokens: known.inputTokens, outputTokens: known.outputTokens, estimated: false }
        : { ...estimateUsage(input, chars), estimated: true };
    }
    throw e;
  }
  const counted: Pick<OpenAICallResult, 'usage' | 'usageEstimated'> = usage.known
    ? { usage: { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens } }
    : { usage: estimateUsage(input, chars), usageEstimated: true };
  if (calls.length > 0) return { kind: 'tool_calls', calls, ...counted };
  return { kind: 'reply', text, ...counted };
}

/** Provider-neutral transcript → the AI SDK's messages. */
export function toModelMessages(messages: readonly TurnMessage[]): ModelMessage[] {
  return messages.map((m): ModelMessage => {
    switch (m.role) {
      case 'user':
        if (!m.images?.length) return { role: 'user', content: m.content };
        return {
          role: 'user',
          content: [
            ...(m.content ? [{ type: 'text' as const, text: m.content }] : []),
            ...m.images.map((i) => ({ type: 'image' as const, image: i.data, mediaType: i.mediaType })),
          ],
        };
      case 'assistant':
        if (!m.toolCalls?.length) return { role: 'assistant', content: m.content };
        return {
          role: 'assistant',
          content: [
            ...(m.content ? [{ type: 'text' as const, text: m.content }] : []),
            ...m.toolCalls.map((c) => ({
              type: 'tool-call' as const,
              toolCallId: c.id,
              toolName: c.name,
              input: c.arguments ?? {},
            })),
          ],
        };
      case 'tool':
        return {
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: m.toolCallId ?? '',
              toolName: m.toolName ?? '',
              output: { type: 'json', value: jsonValue(m.toolResult ?? m.content) },
            },
          ],
        };
      default: {
        const exhaustive: never = m.role;
        return exhaustive;
      }
    }
  });
}

/** A JSON round trip drops `undefined` and anything else the SDK's JSONValue check would reject. */
function jsonValue(v: unknown): never {
  return JSON.parse(JSON.stringify(v ?? null)) as never;
}

function splitParameters(p: Record<string, unknown>) {
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const settings: {
    temperature?: number;
    topP?: number;
    frequencyPenalty?: number;
    presencePenalty?: number;
    seed?: number;
    stopSequences?: string[];
    maxOutputTokens?: number;
  } = {};
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) {
    if (v === undefined || RESERVED.has(k)) continue;
    switch (k) {
      case 'temperature':
        settings.temperature = num(v);
        break;
      case 'top_p':
        settings.topP = num(v);
        break;
      case 'frequency_penalty':
        settings.frequencyPenalty = num(v);
        break;
      case 'presence_penalty':
        settings.presencePenalty = num(v);
        break;
      case 'seed':
        settings.seed = num(v);
        break;
      case 'max_tokens':
        settings.maxOutputTokens = num(v);
        break;
      case 'stop':
        settings.stopSequences = typeof v === 'string' ? [v] : Array.isArray(v) ? v.map(String) : undefined;
        break;
      default:
        extra[k] = v;
    }
  }
  for (const key of Object.keys(settings) as (keyof typeof settings)[]) {
    if (settings[key] === undefined) delete settings[key];
  }
  return { settings, extra };
}

const MALFORMED = [
  InvalidResponseDataError,
  JSONParseError,
  TypeValidationError,
  NoContentGeneratedError,
  EmptyResponseBodyError,
];

/** Maps any failure of a call to a ModelError: retryable or permanent, with a reason class. */
export function classifyModelError(err: unknown, apiKey: string | null): ModelError {
  const clean = (s: string) => redact(s, apiKey).slice(0, 300);
  if (err instanceof ModelError) return err;
  // The SDK may wrap what egressFetch threw (in an APICallError's cause).
  const egress = egressErrorOf(err);
  if (egress instanceof EgressDeniedError) {
    return new ModelError({ message: egress.message, retryable: false, reasonClass: 'egress_denied' });
  }
  if (egress instanceof EgressRedirectError) {
    return new ModelError({
      message: `model provider ${egress.message}`,
      retryable: false,
      reasonClass: 'redirect_refused',
      statusCode: egress.status,
    });
  }
  if (egress instanceof EgressBodyTooLargeError) {
    // The same call would get the same answer: retrying only costs another call.
    return new ModelError({
      message: `model provider ${egress.message}`,
      retryable: false,
      reasonClass: 'response_too_large',
      statusCode: egress.status,
    });
  }
  if (egress instanceof EgressUnavailableError) {
    // Nothing was sent (the host did not resolve, no connection): safe to call again.
    return new ModelError({ message: egress.message, retryable: true, reasonClass: 'egress_unavailable' });
  }
  if (RetryError.isInstance(err)) return classifyModelError(err.lastError, apiKey);
  if (APICallError.isInstance(err)) {
    const status = err.statusCode;
    if (status === undefined) {
      return new ModelError({
        message: `model provider unreachable: ${clean(err.message)}`,
        retryable: true,
        reasonClass: 'network',
      });
    }
    if (status >= 200 && status < 300) {
      return new ModelError({
        message: `model provider sent a malformed response (HTTP ${status})`,
        retryable: true,
        reasonClass: 'malformed_response',
        statusCode: status,
      });
    }
    const retryAfterMs = retryAfter(err.responseHeaders);
    if (status === 429 || status === 408 || status === 409 || status >= 500) {
      const reasonClass = status === 429 ? 'rate_limited' : status >= 500 ? 'server_error' : 'timeout';
      return new ModelError({
        message: `model provider answered HTTP ${status} (${reasonClass}): ${clean(err.message)}`,
        retryable: true,
        reasonClass,
        statusCode: status,
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      });
    }
    const reasonClass = PERMANENT_CLASSES[status] ?? `http_${status}`;
    // A credentials error echoes (part of) the key on some providers: say nothing of its body.
    const detail = status === 401 || status === 403 ? 'the credentials were refused' : clean(err.message);
    return new ModelError({
      message: `model provider answered HTTP ${status} (${reasonClass}): ${detail}`,
      retryable: false,
      reasonClass,
      statusCode: status,
    });
  }
  if (MALFORMED.some((E) => E.isInstance(err))) {
    return new ModelError({
      message: `model provider sent a malformed response: ${clean((err as Error).message)}`,
      retryable: true,
      reasonClass: 'malformed_response',
    });
  }
  if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) {
    return new ModelError({ message: 'model call timed out', retryable: true, reasonClass: 'timeout' });
  }
  if (InvalidPromptError.isInstance(err)) {
    return new ModelError({
      message: `invalid model prompt: ${clean(err.message)}`,
      retryable: false,
      reasonClass: 'invalid_prompt',
    });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ModelError({
    message: `model call failed: ${clean(message)}`,
    retryable: true,
    reasonClass: 'provider_error',
  });
}

const PERMANENT_CLASSES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  413: 'payload_too_large',
  422: 'unprocessable',
};

function redact(text: string, apiKey: string | null): string {
  if (!apiKey || apiKey.length < 4) return text;
  return text.split(apiKey).join('[redacted]');
}

/** `retry-after-ms` (OpenAI) or `retry-after` (seconds or an HTTP date), capped at 10 minutes. */
export function retryAfter(
  headers: Record<string, string> | undefined,
  now: number = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const get = (name: string) =>
    Object.entries(headers)
      .find(([k]) => k.toLowerCase() === name)?.[1]
      ?.trim() || undefined;
  let ms: number | undefined;
  const msHeader = get('retry-after-ms');
  if (msHeader !== undefined && Number.isFinite(Number(msHeader))) ms = Number(msHeader);
  const header = get('retry-after');
  if (ms === undefined && header !== undefined) {
    if (/^\d+(\.\d+)?$/.test(header)) ms = Number(header) * 1000;
    else {
      const at = Date.parse(header);
      if (Number.isFinite(at)) ms = at - now;
    }
  }
  if (ms === undefined || ms < 0) return undefined;
  return Math.min(Math.ceil(ms), MAX_RETRY_AFTER_MS);
}
