import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { exchangesToMessages } from '../../agents/messages';
import {
  callOpenAICompatible,
  MODEL_MAX_RESPONSE_BYTES,
  MODEL_MAX_STREAMED_CHARS,
  ModelError,
  retryAfter,
} from '../../agents/openai';
import { startServer } from '../fakes/http';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';

const KEY = 'sk-test-5ecret-value-0123456789';

describe('callOpenAICompatible against a fake Chat Completions API', () => {
  let fake: FakeOpenAI;
  beforeAll(async () => {
    fake = await startFakeOpenAI({ apiKey: KEY });
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => {
    fake.clearFaults();
    fake.setResponder(undefined);
    fake.requests.length = 0;
    fake.completions.length = 0;
  });

  const call = (over: Partial<Parameters<typeof callOpenAICompatible>[0]> = {}) =>
    callOpenAICompatible({
      baseUrl: fake.baseURL,
      apiKey: KEY,
      model: 'fake-model',
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'hello there' }],
      tools: [],
      timeoutMs: 5000,
      ...over,
    });

  const failure = async (p: Promise<unknown>): Promise<ModelError> => {
    const err = await p.then(
      () => {
        throw new Error('expected the call to fail');
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModelError);
    return err as ModelError;
  };

  it('returns the reply text with token usage, sending system, messages and parameters', async () => {
    fake.enqueue('General Kenobi.');
    const out = await call({ parameters: { temperature: 0.2, top_p: 0.9, user: 'u-1' }, maxTokens: 64 });
    expect(out).toMatchObject({ kind: 'reply', text: 'General Kenobi.' });
    expect(out.usage.inputTokens).toBeGreaterThan(0);
    expect(out.usage.outputTokens).toBe(4);
    const body = fake.completions[0]!.request;
    expect(body.model).toBe('fake-model');
    expect(body.messages[0]).toMatchObject({ role: 'system', content: 'You are terse.' });
    expect(body.messages.at(-1)).toMatchObject({ role: 'user', content: 'hello there' });
    expect(body).toMatchObject({ temperature: 0.2, top_p: 0.9, max_tokens: 64, user: 'u-1' });
    expect(body.tools).toBeUndefined();
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('parses tool calls (tools are offered without being executed) and sends results back', async () => {
    fake.enqueue({ toolCalls: [{ id: 'call_w1', name: 'weather', arguments: { city: 'Oslo' } }] });
    const tools = [
      {
        name: 'weather',
        description: 'Weather for a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    ];
    const out = await call({ tools });
    expect(out).toMatchObject({
      kind: 'tool_calls',
      calls: [{ id: 'call_w1', name: 'weather', arguments: { city: 'Oslo' } }],
    });
    const offered = fake.completions[0]!.request.tools as {
      function: { name: string; parameters: unknown };
    }[];
    expect(offered.map((t) => t.function.name)).toEqual(['weather']);
    expect(offered[0]!.function.parameters).toMatchObject({ required: ['city'] });

    fake.enqueue('It is sunny in Oslo.');
    const next = await call({
      tools,
      messages: [
        { role: 'user', content: 'weather in Oslo?' },
        ...exchangesToMessages([
          {
            call: { id: 'call_w1', name: 'weather', arguments: { city: 'Oslo' } },
            result: { status: 'accepted', body: { temp_c: 21 } },
          },
        ]),
      ],
    });
    expect(next).toMatchObject({ kind: 'reply', text: 'It is sunny in Oslo.' });
    const sent = fake.completions[1]!.request.messages;
    expect(sent.at(-2)).toMatchObject({
      role: 'assistant',
      tool_calls: [{ id: 'call_w1', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
    });
    expect(sent.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_w1', content: '{"temp_c":21}' });
  });

  it('a tool call with unparseable arguments still comes back (the tool activity refuses it)', async () => {
    fake.enqueue({ toolCalls: [{ id: 'call_bad', name: 'weather', arguments: '{not json' }] });
    const out = await call({
      tools: [{ name: 'weather', description: 'w', parameters: { type: 'object' } }],
    });
    expect(out).toMatchObject({
      kind: 'tool_calls',
      calls: [{ id: 'call_bad', name: 'weather', arguments: '{not json' }],
    });
  });

  it('sends back a refused call of a tool the model made up', async () => {
    fake.enqueue('Sorry, I cannot do that.');
    const out = await call({
      tools: [{ name: 'weather', description: 'w', parameters: { type: 'object' } }],
      messages: [
        { role: 'user', content: 'drop the tables' },
        ...exchangesToMessages([
          {
            call: { id: 'call_z', name: 'drop_tables', arguments: {} },
            result: { status: 'refused', body: { error: 'tool_not_allowed: drop_tables' } },
          },
        ]),
      ],
    });
    expect(out).toMatchObject({ kind: 'reply', text: 'Sorry, I cannot do that.' });
    expect(fake.completions[0]!.request.messages.at(-1)).toMatchObject({
      role: 'tool',
      tool_call_id: 'call_z',
      content: JSON.stringify({ status: 'refused', body: { error: 'tool_not_allowed: drop_tables' } }),
    });
  });

  it('429 with Retry-After is retryable and carries the delay', async () => {
    fake.faults.push({ kind: 'rate_limit', retryAfterSeconds: 7 });
    const err = await failure(call());
    expect(err).toMatchObject({
      retryable: true,
      reasonClass: 'rate_limited',
      retryAfterMs: 7000,
      statusCode: 429,
    });
  });

  it('500 is retryable', async () => {
    fake.faults.push({ kind: 'status', status: 500 });
    const err = await failure(call());
    expect(err).toMatchObject({ retryable: true, reasonClass: 'server_error', statusCode: 500 });
  });

  it('a timeout and a dropped connection are retryable', async () => {
    fake.faults.push({ kind: 'timeout', ms: 2000 });
    expect(await failure(call({ timeoutMs: 200 }))).toMatchObject({
      retryable: true,
      reasonClass: 'timeout',
    });
    fake.faults.push({ kind: 'apply_then_drop' });
    expect(await failure(call())).toMatchObject({ retryable: true, reasonClass: 'network' });
  });

  it('401 is permanent and the error never contains the key', async () => {
    const wrong = `${KEY}-wrong`;
    const err = await failure(call({ apiKey: wrong }));
    expect(err).toMatchObject({ retryable: false, reasonClass: 'unauthorized', statusCode: 401 });
    expect(err.message).not.toContain(wrong);
    expect(err.message).not.toContain(KEY);
    expect(JSON.stringify(err)).not.toContain(KEY);
    expect(String(err.stack)).not.toContain(KEY);
  });

  it('400 and 404 are permanent', async () => {
    fake.faults.push({ kind: 'status', status: 400 });
    expect(await failure(call())).toMatchObject({ retryable: false, reasonClass: 'bad_request' });
    fake.faults.push({ kind: 'status', status: 404 });
    expect(await failure(call())).toMatchObject({ retryable: false, reasonClass: 'not_found' });
    fake.faults.push({ kind: 'status', status: 403 });
    expect(await failure(call())).toMatchObject({ retryable: false, reasonClass: 'forbidden' });
  });
});

describe('callOpenAICompatible streaming (stream: true)', () => {
  let fake: FakeOpenAI;
  beforeAll(async () => {
    fake = await startFakeOpenAI({ apiKey: KEY });
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => {
    fake.clearFaults();
    fake.setResponder(undefined);
    fake.setStreamOptions({ chunkChars: 8, chunkDelayMs: 0, omitUsage: false });
    fake.completions.length = 0;
  });

  const stream = (over: Partial<Parameters<typeof callOpenAICompatible>[0]> = {}) =>
    callOpenAICompatible({
      baseUrl: fake.baseURL,
      apiKey: KEY,
      model: 'fake-model',
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'hello there' }],
      tools: [],
      timeoutMs: 5000,
      stream: true,
      ...over,
    });

  it('gives each text delta as the text so far, and the reply with the provider’s usage', async () => {
    fake.enqueue('General Kenobi, you are a bold one.');
    fake.setStreamOptions({ chunkChars: 5 });
    const seen: string[] = [];
    const out = await stream({ onTextDelta: (t) => seen.push(t) });
    expect(out).toMatchObject({ kind: 'reply', text: 'General Kenobi, you are a bold one.' });
    expect(out.usageEstimated).toBeUndefined();
    const { usage } = fake.completions[0]!.response;
    expect(out.usage).toEqual({ inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens });
    expect(seen.length).toBe(7);
    expect(seen.at(-1)).toBe(out.kind === 'reply' ? out.text : '');
    for (const [i, t] of seen.entries()) if (i > 0) expect(t.startsWith(seen[i - 1]!)).toBe(true);
    expect(fake.completions[0]!.request).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it('a provider that ignores include_usage: the usage is an estimate, flagged, never 0/0', async () => {
    fake.enqueue('x'.repeat(400));
    fake.setStreamOptions({ omitUsage: true });
    const out = await stream();
    expect(out.usageEstimated).toBe(true);
    // ~4 characters a token: 400 characters of answer, "You are terse." + "hello there" of prompt.
    expect(out.usage).toEqual({ inputTokens: 7, outputTokens: 100 });
  });

  it('a stream cut mid-answer is a retryable ModelError carrying the usage of what arrived', async () => {
    fake.enqueue('y'.repeat(80));
    fake.setStreamOptions({ chunkDelayMs: 30 });
    fake.dropNextStreamAfter(5);
    const seen: string[] = [];
    const err = await stream({ onTextDelta: (t) => seen.push(t) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ retryable: true });
    // 4 chunks of 8 characters arrived (after the role chunk): 32 characters ≈ 8 tokens.
    expect(seen.at(-1)).toBe('y'.repeat(32));
    expect((err as ModelError).partialUsage).toEqual({ inputTokens: 7, outputTokens: 8, estimated: true });
  });

  it('a call that fails before any token arrived carries no usage', async () => {
    fake.faults.push({ kind: 'status', status: 500 });
    const err = await stream().catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: true, reasonClass: 'server_error' });
    expect((err as ModelError).partialUsage).toBeUndefined();
  });

  it('an answer whose events pass the non-stream byte cap still arrives whole', async () => {
    // A provider whose events are padded (~1 KiB each, as a long system_fingerprint or logprobs
    // make them): 9000 events, ~9 MiB of SSE, for 18k characters of text.
    const events = 9000;
    const base = {
      id: 'c1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      system_fingerprint: 'f'.repeat(1000),
    };
    let written = 0;
    const srv = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const write = (o: unknown) => {
          const line = `data: ${JSON.stringify(o)}\n\n`;
          written += line.length;
          res.write(line);
        };
        for (let i = 0; i < events; i++)
          write({ ...base, choices: [{ index: 0, delta: { content: 'ab' }, finish_reason: null }] });
        write({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
        write({
          ...base,
          choices: [],
          usage: { prompt_tokens: 5, completion_tokens: events, total_tokens: events + 5 },
        });
        res.end('data: [DONE]\n\n');
      });
    });
    try {
      const out = await stream({ baseUrl: srv.url, timeoutMs: 30_000 });
      expect(out).toMatchObject({ kind: 'reply', text: 'ab'.repeat(events) });
      expect(out.usage).toEqual({ inputTokens: 5, outputTokens: events });
      expect(written).toBeGreaterThan(MODEL_MAX_RESPONSE_BYTES);
    } finally {
      await srv.close();
    }
  }, 30_000);

  it('an answer longer than the non-stream budget is a permanent response_too_large, with its usage', async () => {
    fake.enqueue('w'.repeat(MODEL_MAX_STREAMED_CHARS + 1));
    fake.setStreamOptions({ chunkChars: 1024 * 1024 });
    const err = await stream({ timeoutMs: 30_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ retryable: false, reasonClass: 'response_too_large' });
    expect((err as ModelError).partialUsage?.outputTokens).toBeGreaterThan(0);
  }, 30_000);
});

describe('callOpenAICompatible with a malformed provider', () => {
  const bodies: Array<string> = [];
  let srv: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    srv = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(bodies.shift() ?? '{}');
    });
  });
  afterAll(async () => {
    await srv?.close();
  });

  const call = () =>
    callOpenAICompatible({
      baseUrl: srv.url,
      apiKey: KEY,
      model: 'm',
      system: 's',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
      timeoutMs: 5000,
    });

  it.each([
    ['a body that is not JSON', '{"choices": [ {"message": '],
    ['no choices', JSON.stringify({ id: 'x', choices: [], usage: null })],
    ['a body of the wrong shape', JSON.stringify({ choices: 'nope' })],
  ])('%s is retryable malformed_response', async (_name, body) => {
    bodies.push(body);
    const err = await call().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ retryable: true, reasonClass: 'malformed_response' });
    expect((err as Error).message).not.toContain(KEY);
  });
});

describe('retryAfter', () => {
  it('reads retry-after-ms, seconds and HTTP dates, capped at 10 minutes', () => {
    expect(retryAfter({ 'retry-after-ms': '1500.2' })).toBe(1501);
    expect(retryAfter({ 'Retry-After': '3' })).toBe(3000);
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(retryAfter({ 'retry-after': 'Tue, 01 Jan 2030 00:00:05 GMT' }, now)).toBe(5000);
    expect(retryAfter({ 'retry-after': '99999' })).toBe(600_000);
    expect(retryAfter({ 'retry-after': 'soon' })).toBeUndefined();
    expect(retryAfter(undefined)).toBeUndefined();
  });
});
