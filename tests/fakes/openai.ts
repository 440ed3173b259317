// Fake OpenAI-compatible Chat Completions API: plain answers, and `stream: true` answered as
// server-sent events (chat.completion.chunk lines, a usage chunk when stream_options.include_usage,
// then `data: [DONE]`), as the real API streams. Test fixture only.
import type { ServerResponse } from 'node:http';
import {
  answer,
  type Fault,
  FaultInjector,
  type FaultKind,
  type FaultPlan,
  parseBody,
  type RandomFaultOptions,
  type RecordedRequest,
  type Reply,
  readBody,
  sendJson,
  startServer,
  waitForCount,
} from './http';

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | string;
  content?: string | Array<{ type: string; text?: string; image_url?: { url?: string } }> | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  name?: string;
}

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatCompletionRequest {
  model: string;
  messages: ChatMessage[];
  tools?: unknown[];
  tool_choice?: unknown;
  stream?: boolean;
  [k: string]: unknown;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[]; refusal: null };
    logprobs: null;
    finish_reason: string;
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

export interface ScriptedToolCall {
  /** defaults to call_<n> */
  id?: string;
  name: string;
  /** object args are JSON.stringify-ed */
  arguments: string | Record<string, unknown>;
}

export interface ScriptedResponse {
  content?: string | null;
  toolCalls?: ScriptedToolCall[];
  /** default: 'tool_calls' when toolCalls given, else 'stop' */
  finishReason?: string;
}

/** A scripted reply: plain string content, a structured response, or a function of the request. */
export type Script = string | ScriptedResponse | ((req: ChatCompletionRequest) => string | ScriptedResponse);

export interface OpenAIRequest extends RecordedRequest {
  model?: string;
  /** the client closed the connection before the answer was written (an aborted call) */
  aborted?: boolean;
}

/** How `stream: true` answers are written. */
export interface StreamOptions {
  /** characters of content (or tool arguments) per chunk (default 8) */
  chunkChars?: number;
  /** pause between chunks in ms (default 0) */
  chunkDelayMs?: number;
  /**
   * no usage chunk even when stream_options.include_usage asks for one, as some OpenAI-compatible
   * servers do (default false)
   */
  omitUsage?: boolean;
}

export interface FakeOpenAIOptions {
  /** accepted bearer key (default 'sk-fake') */
  apiKey?: string;
}

export interface FakeOpenAI {
  readonly url: string;
  /** base URL to give an OpenAI client, i.e. `${url}/v1` */
  readonly baseURL: string;
  readonly apiKey: string;
  readonly requests: OpenAIRequest[];
  /** successful completions produced (request + response), including ones whose socket was dropped */
  readonly completions: Array<{ request: ChatCompletionRequest; response: ChatCompletion }>;
  /** FIFO of faults applied to the next chat/completions requests */
  readonly faults: Fault[];
  readonly faultsInjected: number;
  readonly faultsByKind: Readonly<Record<FaultKind, number>>;
  /** queue scripted replies, consumed one per successful completion (FIFO) */
  enqueue(...scripts: Script[]): void;
  /** replies used when the queue is empty (default: `echo: <last user text>`) */
  setResponder(script: Script | undefined): void;
  setFaultPlan(plan: FaultPlan<OpenAIRequest> | undefined): void;
  /** chunk size and pacing of streamed answers (merged into the current options) */
  setStreamOptions(opts: StreamOptions): void;
  /** the next streamed answer is cut off (the socket destroyed) after this many chunks */
  dropNextStreamAfter(chunks: number): void;
  /** chat.completion.chunk objects written per streamed completion, in order */
  readonly streamedChunks: unknown[][];
  failRandomly(opts: RandomFaultOptions | undefined): void;
  clearFaults(): void;
  waitForCompletions(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function oaiError(
  status: number,
  message: string,
  type: string,
  code: string | null,
  param: string | null = null,
) {
  return { status, body: { error: { message, type, param, code } } };
}

function textOf(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => p.text ?? '').join('');
  return '';
}

/**
 * The image parts of a request's user messages, decoded, as the Chat Completions API takes them:
 * `{ type: 'image_url', image_url: { url: 'data:<image type>;base64,<bytes>' } }` (or an http(s)
 * URL, returned with no bytes). A malformed part makes the request a 400, as the real API does.
 */
export function imagePartsOf(
  req: ChatCompletionRequest,
): { ok: true; images: { mediaType: string | null; bytes: Buffer | null; url: string }[] } | { ok: false } {
  const images: { mediaType: string | null; bytes: Buffer | null; url: string }[] = [];
  for (const m of req.messages) {
    if (m.role !== 'user' || !Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (part.type !== 'image_url') continue;
      const url = part.image_url?.url;
      if (typeof url !== 'string') return { ok: false };
      if (/^https?:\/\//.test(url)) {
        images.push({ mediaType: null, bytes: null, url });
        continue;
      }
      const data = /^data:(image\/(?:jpeg|png|gif|webp));base64,([A-Za-z0-9+/]+={0,2})$/.exec(url);
      if (!data) return { ok: false };
      images.push({ mediaType: data[1]!, bytes: Buffer.from(data[2]!, 'base64'), url });
    }
  }
  return { ok: true, images };
}

/** Deterministic default reply: echo of the last user message. */
export function lastUserText(req: ChatCompletionRequest): string {
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i];
    if (m?.role === 'user') return textOf(m.content);
  }
  return '';
}

const approxTokens = (s: string) => Math.ceil(s.length / 4);

export async function startFakeOpenAI(opts: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const apiKey = opts.apiKey ?? 'sk-fake';
  const requests: OpenAIRequest[] = [];
  const completions: FakeOpenAI['completions'] = [];
  const queue: Script[] = [];
  const injector = new FaultInjector<OpenAIRequest>();
  let responder: Script = (req) => `echo: ${lastUserText(req)}`;
  let seq = 0;
  let callSeq = 0;

  const complete = (req: ChatCompletionRequest): ChatCompletion => {
    const script = queue.shift() ?? responder;
    const resolved = typeof script === 'function' ? script(req) : script;
    const r: ScriptedResponse = typeof resolved === 'string' ? { content: resolved } : resolved;
    const toolCalls: ChatToolCall[] | undefined = r.toolCalls?.map((t) => ({
      id: t.id ?? `call_${++callSeq}`,
      type: 'function',
      function: {
        name: t.name,
        arguments: typeof t.arguments === 'string' ? t.arguments : JSON.stringify(t.arguments),
      },
    }));
    const content = r.content ?? (toolCalls?.length ? null : '');
    const promptTokens = req.messages.reduce((n, m) => n + 4 + approxTokens(textOf(m.content)), 3);
    const completionTokens =
      approxTokens(content ?? '') +
      (toolCalls ?? []).reduce((n, t) => n + approxTokens(t.function.name + t.function.arguments), 0);
    return {
      id: `chatcmpl-fake-${++seq}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: req.model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content,
            ...(toolCalls?.length ? { tool_calls: toolCalls } : {}),
            refusal: null,
          },
          logprobs: null,
          finish_reason: r.finishReason ?? (toolCalls?.length ? 'tool_calls' : 'stop'),
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      },
    };
  };

  const handleCompletion = (
    auth: string | undefined,
    body: Record<string, unknown> | undefined,
  ): Reply & { streamed?: ChatCompletion } => {
    if (!auth?.startsWith('Bearer ')) {
      return oaiError(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        'invalid_request_error',
        null,
      );
    }
    if (auth.slice('Bearer '.length).trim() !== apiKey) {
      return oaiError(401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
    }
    if (!body)
      return oaiError(
        400,
        'We could not parse the JSON body of your request.',
        'invalid_request_error',
        null,
      );
    if (typeof body.model !== 'string' || body.model === '') {
      return oaiError(
        400,
        "Missing required parameter: 'model'.",
        'invalid_request_error',
        'missing_required_parameter',
        'model',
      );
    }
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return oaiError(
        400,
        "Missing required parameter: 'messages'.",
        'invalid_request_error',
        'missing_required_parameter',
        'messages',
      );
    }
    const request = body as ChatCompletionRequest;
    if (!imagePartsOf(request).ok) {
      return oaiError(
        400,
        'Invalid image_url: expected a base64 data URL of an image.',
        'invalid_request_error',
        'invalid_image_format',
        'messages',
      );
    }
    const response = complete(request);
    completions.push({ request, response });
    return { status: 200, body: response, ...(request.stream === true ? { streamed: response } : {}) };
  };

  let streamOpts: Required<StreamOptions> = { chunkChars: 8, chunkDelayMs: 0, omitUsage: false };
  let dropAfter: number | null = null;
  const streamedChunks: unknown[][] = [];

  /** The completion as the chunks the real API streams: role, content pieces, tool-call deltas, finish. */
  const chunksOf = (c: ChatCompletion, includeUsage: boolean): unknown[] => {
    const choice = c.choices[0]!;
    const base = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model };
    const n = Math.max(1, streamOpts.chunkChars);
    const pieces = (text: string) => {
      const out: string[] = [];
      for (let i = 0; i < text.length; i += n) out.push(text.slice(i, i + n));
      return out;
    };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });
    const out: unknown[] = [chunk({ role: 'assistant', content: '' })];
    for (const p of pieces(choice.message.content ?? '')) out.push(chunk({ content: p }));
    (choice.message.tool_calls ?? []).forEach((t, index) => {
      out.push(
        chunk({
          tool_calls: [
            { index, id: t.id, type: 'function', function: { name: t.function.name, arguments: '' } },
          ],
        }),
      );
      for (const p of pieces(t.function.arguments))
        out.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
    });
    out.push(chunk({}, choice.finish_reason));
    if (includeUsage) out.push({ ...base, choices: [], usage: c.usage });
    return out;
  };

  const streamCompletion = async (res: ServerResponse, rec: OpenAIRequest, c: ChatCompletion) => {
    const options = (rec.body?.stream_options ?? {}) as { include_usage?: unknown };
    const chunks = chunksOf(c, options.include_usage === true && !streamOpts.omitUsage);
    const written: unknown[] = [];
    streamedChunks.push(written);
    const cutAfter = dropAfter;
    dropAfter = null;
    rec.status = 200;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    for (const [i, chunk] of chunks.entries()) {
      if (cutAfter !== null && i >= cutAfter) {
        res.socket?.destroy();
        return;
      }
      if (res.destroyed || srv.closed) return;
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      written.push(chunk);
      if (streamOpts.chunkDelayMs > 0 && i < chunks.length - 1) await srv.hold(streamOpts.chunkDelayMs);
    }
    res.end('data: [DONE]\n\n');
  };

  const srv = await startServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const body = parseBody(req, raw);
    const isCompletion =
      req.method === 'POST' && url.pathname.replace(/\/+$/, '').endsWith('/chat/completions');
    const isModels = req.method === 'GET' && url.pathname.replace(/\/+$/, '').endsWith('/models');
    const rec: OpenAIRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: url.pathname,
      endpoint: isCompletion ? 'chat.completions' : isModels ? 'models' : url.pathname,
      body,
      headers: req.headers,
      ...(typeof body?.model === 'string' ? { model: body.model } : {}),
    };
    requests.push(rec);
    res.on('close', () => {
      if (!res.writableFinished) rec.aborted = true;
    });
    if (!isCompletion && !isModels) {
      const r = oaiError(404, `Invalid URL (${req.method} ${url.pathname})`, 'invalid_request_error', null);
      rec.status = r.status;
      return sendJson(res, r.status, r.body);
    }
    const fault = injector.next(rec, isCompletion);
    const onFault = (f: Extract<Fault, { kind: 'status' | 'rate_limit' }>): Reply =>
      f.kind === 'status'
        ? oaiError(
            f.status,
            'The server had an error while processing your request. Sorry about that!',
            'server_error',
            null,
          )
        : {
            ...oaiError(
              429,
              'Rate limit reached for requests. Please try again later.',
              'requests',
              'rate_limit_exceeded',
            ),
            headers: { 'retry-after': String(f.retryAfterSeconds) },
          };
    // A streamed answer: faults that answer instead (status, 429, timeout, apply_then_drop) as for
    // any request; otherwise (after a delay fault's wait) the events.
    if (
      isCompletion &&
      body?.stream === true &&
      (!fault || fault.kind === 'delay' || fault.kind === 'late')
    ) {
      rec.fault = fault?.kind;
      if (fault?.kind === 'delay' || fault?.kind === 'late') await srv.hold(fault.ms);
      const r = handleCompletion(req.headers.authorization, body);
      if (!r.streamed) {
        rec.status = r.status;
        return sendJson(res, r.status, r.body, r.headers);
      }
      return streamCompletion(res, rec, r.streamed);
    }
    await answer(srv, res, rec, fault, onFault, () => {
      if (isModels) {
        return {
          status: 200,
          body: {
            object: 'list',
            data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'fake' }],
          },
        };
      }
      return handleCompletion(req.headers.authorization, body);
    });
  });

  return {
    url: srv.url,
    baseURL: `${srv.url}/v1`,
    apiKey,
    requests,
    completions,
    faults: injector.queue,
    get faultsInjected() {
      return injector.injected;
    },
    faultsByKind: injector.injectedByKind,
    enqueue: (...scripts) => void queue.push(...scripts),
    setResponder(script) {
      responder = script ?? ((req) => `echo: ${lastUserText(req)}`);
    },
    setFaultPlan: (plan) => injector.setPlan(plan),
    setStreamOptions(opts) {
      streamOpts = { ...streamOpts, ...opts };
    },
    dropNextStreamAfter(chunks) {
      dropAfter = chunks;
    },
    streamedChunks,
    failRandomly: (o) => injector.failRandomly(o),
    clearFaults: () => injector.clear(),
    waitForCompletions: (n, timeoutMs = 5000) =>
      waitForCount(() => completions.length, n, timeoutMs, 'chat completions'),
    close: () => srv.close(),
  };
}
