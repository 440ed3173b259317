import { fileURLToPath } from 'node:url';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { executionActivities } from '../../activities/execution';
import { type ModelTurnInput, modelActivities } from '../../activities/model';
import { toolIdempotencyKey } from '../../activities/tool-calls/record';
import { toolActivities } from '../../activities/tools';
import type { ToolCall } from '../../agents/messages';
import { contentDigest } from '../../lib/digest';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import {
  auditOf,
  createTestDeps,
  type ExecutionSeed,
  invocationsOf,
  seedExecution,
  type TestDeps,
} from '../helpers/execution-seed';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

const KEY = 'sk-zombie-0123456789abcdef';

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => {
      throw new Error('expected the attempt to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

// A zombie: an activity attempt that outlived its StartToClose timeout and finishes after its
// retry claimed a newer fence. Its writes are rejected (FencedOut) and the state stays the
// retry's. First at the activity level, attempts interleaved the way Temporal would run them;
// then end to end, with a real Temporal retry of a stalled attempt.
describe('zombie attempts are fenced out', () => {
  let deps: TestDeps;
  let fake: FakeOpenAI;
  let tp: FakeToolProvider;
  let model: ReturnType<typeof modelActivities>;
  let execution: ReturnType<typeof executionActivities>;
  let tools: ReturnType<typeof toolActivities>;

  beforeAll(async () => {
    deps = createTestDeps({ sendTimeoutMs: 5000 });
    fake = await startFakeOpenAI({ apiKey: KEY });
    tp = await startFakeToolProvider();
    model = modelActivities(deps);
    execution = executionActivities(deps);
    tools = toolActivities(deps);
  });
  afterAll(async () => {
    await fake?.close();
    await tp?.close();
    await deps?.close();
  });
  beforeEach(() => {
    fake.clearFaults();
    fake.setResponder(undefined);
  });

  const seedOpenAI = (extra: Parameters<typeof seedExecution>[2] = {}) =>
    seedExecution(deps.sql, deps.secrets, {
      provider: 'openai_compatible',
      baseUrl: fake.baseURL,
      apiKey: KEY,
      pricing: { input_per_mtok_minor: 1_000_000, output_per_mtok_minor: 0 },
      tenant: { billing_currency: 'EUR' },
      ...extra,
    });
  const turnOf = (s: ExecutionSeed): ModelTurnInput => ({
    tenantId: s.tenantId,
    eventId: s.eventId,
    plan: s.plan,
    exchanges: [],
  });
  const usageOf = (tenantId: string) =>
    deps.sql<{ usage_id: string; tokens_in: number; cost_minor: number }[]>`
      select usage_id, tokens_in, cost_minor from usage_event where tenant_id = ${tenantId}`;
  const fenceOf = async (s: ExecutionSeed) =>
    (
      await deps.sql<{ execution_fencing_token: number; status: string }[]>`
        select execution_fencing_token, status from message_event
        where tenant_id = ${s.tenantId} and event_id = ${s.eventId}`
    )[0]!;
  const requestsWith = (text: string) =>
    fake.requests.filter((r) => JSON.stringify(r.body?.messages ?? '').includes(text));

  it('modelTurn: the stalled attempt returns after its retry committed → FencedOut, no audit of its own (its spent tokens counted); a zombie commit cannot change the pinned reply', async () => {
    const s = await seedOpenAI({ text: 'zombie model turn' });
    // Attempt 1's request stalls at the provider (the completion is produced at once, answered late).
    fake.faults.push({ kind: 'delay', ms: 1500 });
    fake.enqueue('reply of the stalled attempt', 'reply of the retry');
    const zombie = model.modelTurn(turnOf(s));
    await waitFor(() =>
      fake.completions.some((c) => c.response.choices[0]?.message.content === 'reply of the stalled attempt'),
    );

    // Temporal's retry (attempt 2) claims a newer fence and completes while attempt 1 still waits.
    const retry = await model.modelTurn(turnOf(s));
    expect(retry).toEqual({ kind: 'reply', text: 'reply of the retry' });
    const afterRetry = await usageOf(s.tenantId);
    expect(afterRetry).toHaveLength(1);
    const retryCompletion = fake.completions.find(
      (c) => c.response.choices[0]?.message.content === 'reply of the retry',
    )!;
    expect(afterRetry[0]).toMatchObject({
      tokens_in: retryCompletion.response.usage.prompt_tokens,
      cost_minor: retryCompletion.response.usage.prompt_tokens,
    });

    // Attempt 1 finally gets its answer: its audit (and its answer) is refused; the provider
    // billed its tokens, so its usage event is recorded beside the retry's.
    const err = await failureOf(zombie);
    expect(err.type).toBe('FencedOut');
    expect(err.nonRetryable).toBe(true);
    const stalled = fake.completions.find(
      (c) => c.response.choices[0]?.message.content === 'reply of the stalled attempt',
    )!;
    const usage = await usageOf(s.tenantId);
    expect(usage).toHaveLength(2);
    expect(usage).toEqual(
      expect.arrayContaining([
        afterRetry[0],
        expect.objectContaining({ tokens_in: stalled.response.usage.prompt_tokens }),
      ]),
    );
    const turns = (await auditOf(deps.sql, s.tenantId)).filter((a) => a.action === 'model.turn');
    expect(turns).toHaveLength(1);
    expect(turns[0]!.details).toMatchObject({ usage_id: afterRetry[0]!.usage_id });
    // Seed's claim (1) + one claim per attempt.
    expect(await fenceOf(s)).toEqual({ execution_fencing_token: 3, status: 'running' });

    // The workflow commits the retry's reply; a zombie commit with the stale reply gets the pinned
    // reply back and changes nothing.
    const committed = await execution.commitReply({
      tenantId: s.tenantId,
      eventId: s.eventId,
      channel: 'telegram',
      text: 'reply of the retry',
      outcome: null,
    });
    if ('interrupted' in committed) throw new Error('an enqueue revision is never interrupted');
    const stale = await execution.commitReply({
      tenantId: s.tenantId,
      eventId: s.eventId,
      channel: 'telegram',
      text: 'reply of the stalled attempt',
      outcome: null,
    });
    expect(stale).toMatchObject({ replyId: committed.replyId, segmentIds: committed.segmentIds });
    const cache = await deps.sql<{ content: string }[]>`
      select content from reply_cache where tenant_id = ${s.tenantId}`;
    expect(cache.map((c) => c.content)).toEqual(['reply of the retry']);
    const outbox = await deps.sql<{ content: string }[]>`
      select content from reply_outbox where tenant_id = ${s.tenantId} order by segment_index`;
    expect(outbox.map((o) => o.content)).toEqual(['reply of the retry']);
  });

  it('invokeTool: the stalled dispatch returns after a newer attempt reconciled it → FencedOut; the effect exists once and the state is the retry’s', async () => {
    const s = await seedExecution(deps.sql, deps.secrets, {
      tools: [
        {
          name: 'create_order',
          description: 'Places an order',
          parameters: { type: 'object', properties: { item: { type: 'string' } }, required: ['item'] },
          endpoint_url: `${tp.url}/tools/create_order`,
          side_effect: true,
          idempotency: 'provider_key',
          receipt_url: `${tp.url}/receipts/{key}`,
        },
      ],
    });
    const call: ToolCall = { id: 'call_0', name: 'create_order', arguments: { item: 'widget' } };
    const input = { tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, call, step: 0 };
    const key = toolIdempotencyKey(s.eventId, 0, 0, call.name, contentDigest(call.arguments));
    // The provider applies the call at once and answers late: attempt 1 stalls holding the claim.
    tp.faults.push({ kind: 'delay', ms: 1500 });
    const zombie = tools.invokeTool(input);
    await waitFor(() => tp.effectCount(key) === 1);

    // Attempt 1's StartToClose timed out long ago in Temporal's eyes; its claim's lease has run out
    // too (the lease is longer than a test may wait, so it is ended here).
    await deps.sql`update tool_invocation set lease_expires_at = now() - interval '1 second'
                   where tenant_id = ${s.tenantId} and idempotency_key = ${key}`;
    // Attempt 2 takes the call over under a newer fence and reconciles it by its key: never resent.
    const retry = await tools.invokeTool(input);
    expect(retry).toMatchObject({ status: 'accepted', body: { key, result: { item: 'widget' } } });
    const [afterRetry] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(afterRetry).toMatchObject({ status: 'accepted', attempts: 1, fencing_token: 2 });

    const err = await failureOf(zombie);
    expect(err.type).toBe('FencedOut');
    expect(err.nonRetryable).toBe(true);
    expect(await invocationsOf(deps.sql, s.tenantId, s.eventId)).toEqual([afterRetry]);
    const posts = tp.requests.filter((r) => r.endpoint === 'tool' && r.key === key);
    expect(posts).toHaveLength(1);
    expect(tp.requests.filter((r) => r.endpoint === 'receipt' && r.key === key)).toHaveLength(1);
    expect(tp.effectCount(key)).toBe(1);
    const audit = await auditOf(deps.sql, s.tenantId);
    expect(audit.map((a) => [a.action, a.decision])).toEqual([['tool.invocation', 'accepted']]);
    expect(audit[0]!.details).toMatchObject({ reconciled: true, after: 'dispatch_lease_expired' });
  });

  describe('end to end, with a real Temporal retry', () => {
    let h: Harness;
    let worker: Worker;
    let running: Promise<void>;
    const outcomes: { attempt: number; result: string }[] = [];

    beforeAll(async () => {
      h = await createHarness();
      const bundle = await bundleWorkflowCode({
        workflowsPath: fileURLToPath(new URL('../workflows/zombie.ts', import.meta.url)),
        logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
      });
      // The real activity, observed: how each attempt ended, including one Temporal no longer awaits.
      worker = await Worker.create({
        connection: h.nativeConnection,
        namespace: 'default',
        taskQueue: h.taskQueue,
        workflowBundle: bundle,
        activities: {
          async modelTurn(input: ModelTurnInput) {
            const { attempt } = Context.current().info;
            try {
              const out = await model.modelTurn(input);
              outcomes.push({ attempt, result: 'completed' });
              return out;
            } catch (err) {
              outcomes.push({ attempt, result: (err as ApplicationFailure).type ?? 'error' });
              throw err;
            }
          },
        },
      });
      running = worker.run();
    });
    afterAll(async () => {
      if (worker?.getState() === 'RUNNING') worker.shutdown();
      await running;
      await h?.close();
    });

    it('attempt 1 stalls past its 2 s StartToClose, attempt 2 completes; attempt 1 finishes later and is FencedOut, writing only its usage', async () => {
      const s = await seedOpenAI({ text: 'zombie end to end' });
      fake.faults.push({ kind: 'delay', ms: 4000 });
      fake.enqueue('reply of the timed-out attempt', 'reply of attempt 2');
      const result = await h.temporal.workflow.execute('zombieModelTurnWorkflow', {
        workflowId: `zombie-${s.eventId}`,
        taskQueue: h.taskQueue,
        args: [turnOf(s)],
      });
      expect(result).toEqual({ kind: 'reply', text: 'reply of attempt 2' });
      expect(outcomes).toEqual([{ attempt: 2, result: 'completed' }]);
      const [second] = await usageOf(s.tenantId);
      expect(second).toBeDefined();

      // The zombie still runs in the worker; when its answer arrives, its commit is refused.
      await waitFor(() => outcomes.length === 2, { timeoutMs: 10_000, label: 'the zombie attempt to end' });
      expect(outcomes[1]).toEqual({ attempt: 1, result: 'FencedOut' });
      expect(requestsWith('zombie end to end')).toHaveLength(2);
      // Its tokens were spent: counted (a usage event), but nothing else of it is written.
      const usage = await usageOf(s.tenantId);
      expect(usage).toHaveLength(2);
      const turns = (await auditOf(deps.sql, s.tenantId)).filter((a) => a.action === 'model.turn');
      expect(turns).toHaveLength(1);
      expect(turns[0]!.details).toMatchObject({ usage_id: second!.usage_id });
      expect(await fenceOf(s)).toEqual({ execution_fencing_token: 3, status: 'running' });
    }, 60_000);
  });
});
