import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { modelActivities } from '../../activities/model';
import { claimExecutionFence } from '../../db/queries/execution';
import { withTenantTx } from '../../db/tx';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import {
  addMessage,
  auditOf,
  createTestDeps,
  type ExecutionSeedOptions,
  seedExecution,
  type TestDeps,
} from '../helpers/execution-seed';
import { waitFor } from '../helpers/wait';

const KEY = 'sk-model-turn-5ecret-0123456789';

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => {
      throw new Error('expected the activity to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('modelTurn', () => {
  let deps: TestDeps;
  let fake: FakeOpenAI;
  let act: ReturnType<typeof modelActivities>;

  beforeAll(async () => {
    deps = createTestDeps();
    fake = await startFakeOpenAI({ apiKey: KEY });
    act = modelActivities(deps);
  });
  afterAll(async () => {
    await fake?.close();
    await deps?.close();
  });
  beforeEach(() => {
    fake.clearFaults();
    fake.setResponder(undefined);
    fake.requests.length = 0;
    fake.completions.length = 0;
  });

  const openai = (opts: ExecutionSeedOptions = {}) =>
    seedExecution(deps.sql, deps.secrets, {
      provider: 'openai_compatible',
      baseUrl: fake.baseURL,
      apiKey: KEY,
      pricing: { input_per_mtok_minor: 300, output_per_mtok_minor: 1500 },
      tenant: { billing_currency: 'EUR' },
      ...opts,
    });

  const usageRows = (tenantId: string) =>
    deps.sql<
      { event_id: string; tokens_in: number; tokens_out: number; cost_minor: number; currency: string }[]
    >`
      select event_id, tokens_in, tokens_out, cost_minor, currency from usage_event where tenant_id = ${tenantId}`;

  const seedUsage = (tenantId: string, modelProfileId: string, tokens: number, cost: number, at = 'now()') =>
    deps.sql.unsafe(
      `insert into usage_event (tenant_id, usage_id, model_profile_id, tokens_in, tokens_out, cost_minor, currency, occurred_at)
       values ($1, 'use_' || md5(random()::text), $2, $3, 0, $4, 'EUR', ${at})`,
      [tenantId, modelProfileId, tokens, cost],
    );

  describe('scripted', () => {
    const scripted = {
      rules: [
        {
          match: '^weather in (\\w+)',
          tool_call: { name: 'weather', arguments: { city: '{{1}}' } },
          reply: 'Forecast: {{tool_result}}',
        },
        { match: '^hi', reply: 'Hello, {{text}}!' },
      ],
      default_reply: 'You said: {{text}}',
    };

    it('replies by rule, asks for a tool call, then renders the tool result', async () => {
      const s = await seedExecution(deps.sql, deps.secrets, { scripted, text: 'hi there' });
      expect(
        await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      ).toEqual({
        kind: 'reply',
        text: 'Hello, hi there!',
      });

      const w = await seedExecution(deps.sql, deps.secrets, { scripted, text: '  weather in Oslo  ' });
      const first = await act.modelTurn({
        tenantId: w.tenantId,
        eventId: w.eventId,
        plan: w.plan,
        exchanges: [],
      });
      expect(first).toEqual({
        kind: 'tool_calls',
        calls: [{ id: 'call_0', name: 'weather', arguments: { city: 'Oslo' } }],
      });

      const second = await act.modelTurn({
        tenantId: w.tenantId,
        eventId: w.eventId,
        plan: w.plan,
        exchanges: [
          {
            call: { id: 'call_0', name: 'weather', arguments: { city: 'Oslo' } },
            result: { status: 'accepted', body: { temp_c: 21, sky: 'clear' } },
          },
        ],
      });
      expect(second).toEqual({ kind: 'reply', text: 'Forecast: {"temp_c":21,"sky":"clear"}' });
      expect(await usageRows(w.tenantId)).toHaveLength(0);
    });
  });

  describe('openai_compatible', () => {
    it('sends system, history and the message; records usage with the exact cost and an audit entry', async () => {
      const s = await openai({ text: 'and now?', systemPrompt: 'Be brief.' });
      // Two earlier replied messages of the same session, and one after (not context).
      await addMessage(deps.sql, s, { text: 'first question', status: 'replied', reply: 'first answer' });
      const later = await addMessage(deps.sql, s, {
        text: 'second question',
        status: 'replied',
        reply: 'second answer',
      });
      const current = await addMessage(deps.sql, s, { text: 'what about now?', status: 'running' });
      expect(later.eventSeq).toBeLessThan(current.eventSeq);

      fake.enqueue('Now is fine.');
      const out = await act.modelTurn({
        tenantId: s.tenantId,
        eventId: current.eventId,
        plan: s.plan,
        exchanges: [],
      });
      expect(out).toEqual({ kind: 'reply', text: 'Now is fine.' });

      const req = fake.completions[0]!;
      expect(req.request.messages.map((m) => [m.role, m.content])).toEqual([
        ['system', 'Be brief.'],
        ['user', 'first question'],
        ['assistant', 'first answer'],
        ['user', 'second question'],
        ['assistant', 'second answer'],
        ['user', 'what about now?'],
      ]);
      const { prompt_tokens: tin, completion_tokens: tout } = req.response.usage;
      const [usage] = await usageRows(s.tenantId);
      expect(usage).toEqual({
        event_id: current.eventId,
        tokens_in: tin,
        tokens_out: tout,
        cost_minor: Math.ceil((tin * 300 + tout * 1500) / 1e6),
        currency: 'EUR',
      });
      const audit = (await auditOf(deps.sql, s.tenantId)).filter((a) => a.action === 'model.turn');
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatchObject({
        decision: 'reply',
        cost_minor: usage!.cost_minor,
        event_seq: current.eventSeq,
        session_id: s.sessionId,
        model_profile_id: s.modelProfileId,
      });
      expect(audit[0]!.details).toMatchObject({ tokens_in: tin, tokens_out: tout });
      expect(JSON.stringify(audit)).not.toContain(KEY);
    });

    it('returns tool calls, then sends the exchanges back on the next turn', async () => {
      const tools = [
        {
          name: 'lookup',
          description: 'Looks up an order',
          parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
          endpoint_url: 'http://127.0.0.1:9/tools/lookup',
          side_effect: false,
          idempotency: 'none',
        },
      ];
      const s = await openai({ tools, text: 'where is order 7?' });
      fake.enqueue({ toolCalls: [{ id: 'call_x', name: 'lookup', arguments: { id: '7' } }] });
      const first = await act.modelTurn({
        tenantId: s.tenantId,
        eventId: s.eventId,
        plan: s.plan,
        exchanges: [],
      });
      expect(first).toEqual({
        kind: 'tool_calls',
        calls: [{ id: 'call_x', name: 'lookup', arguments: { id: '7' } }],
      });
      expect((fake.completions[0]!.request.tools as unknown[]).length).toBe(1);

      fake.enqueue('Order 7 has shipped.');
      const second = await act.modelTurn({
        tenantId: s.tenantId,
        eventId: s.eventId,
        plan: s.plan,
        exchanges: [
          {
            call: { id: 'call_x', name: 'lookup', arguments: { id: '7' } },
            result: { status: 'accepted', body: { state: 'shipped' } },
          },
        ],
      });
      expect(second).toEqual({ kind: 'reply', text: 'Order 7 has shipped.' });
      const msgs = fake.completions[1]!.request.messages;
      expect(msgs.at(-1)).toMatchObject({
        role: 'tool',
        tool_call_id: 'call_x',
        content: '{"state":"shipped"}',
      });
      expect(await usageRows(s.tenantId)).toHaveLength(2);
    });

    it('honours limits.max_tokens', async () => {
      const s = await openai({ limits: { max_tokens: 33, deadline_s: 20 } });
      await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] });
      expect(fake.completions[0]!.request.max_tokens).toBe(33);
    });

    it('a retryable provider failure throws ModelRetryable with the provider’s delay, and records nothing', async () => {
      const s = await openai();
      fake.faults.push({ kind: 'rate_limit', retryAfterSeconds: 3 });
      const err = await failureOf(
        act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      );
      expect(err.type).toBe('ModelRetryable');
      expect(err.nonRetryable).toBeFalsy();
      expect(err.nextRetryDelay).toBe(3000);
      expect(await usageRows(s.tenantId)).toHaveLength(0);
    });

    it('a permanent provider failure is ModelPermanent, audited, and never shows the key', async () => {
      const s = await openai({ apiKey: `${KEY}-revoked` });
      const err = await failureOf(
        act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      );
      expect(err.type).toBe('ModelPermanent');
      expect(err.nonRetryable).toBe(true);
      expect(err.message).not.toContain(KEY);
      const audit = await auditOf(deps.sql, s.tenantId);
      expect(audit.map((a) => [a.decision, a.error_type])).toEqual([['failed', 'unauthorized']]);
    });
  });

  describe('budgets', () => {
    it('a used-up monthly token budget returns budget_exhausted without calling the model', async () => {
      const s = await openai({ tenant: { monthly_token_budget: 1000, billing_currency: 'EUR' } });
      await seedUsage(s.tenantId, s.modelProfileId, 600, 0);
      // Last month's usage does not count.
      await seedUsage(
        s.tenantId,
        s.modelProfileId,
        10_000,
        0,
        "date_trunc('month', now()) - interval '1 day'",
      );
      fake.enqueue('ok');
      expect(
        await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      ).toMatchObject({
        kind: 'reply',
      });
      expect(fake.requests).toHaveLength(1);

      await seedUsage(s.tenantId, s.modelProfileId, 400, 0);
      expect(
        await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      ).toEqual({
        kind: 'budget_exhausted',
      });
      expect(fake.requests).toHaveLength(1);
      const audit = await auditOf(deps.sql, s.tenantId);
      expect(audit.at(-1)).toMatchObject({ decision: 'budget_exhausted', error_type: 'token_budget' });
    });

    it('a used-up monthly spend limit returns budget_exhausted without calling the model', async () => {
      const s = await openai({ tenant: { monthly_spend_limit_minor: 500, billing_currency: 'EUR' } });
      await seedUsage(s.tenantId, s.modelProfileId, 1, 500);
      expect(
        await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      ).toEqual({
        kind: 'budget_exhausted',
      });
      expect(fake.requests).toHaveLength(0);
      expect((await auditOf(deps.sql, s.tenantId)).at(-1)).toMatchObject({ error_type: 'spend_limit' });
    });

    it('a budget of 0 allows nothing', async () => {
      const s = await openai({ tenant: { monthly_token_budget: 0, billing_currency: 'EUR' } });
      expect(
        await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      ).toEqual({
        kind: 'budget_exhausted',
      });
      const z = await openai({ tenant: { monthly_spend_limit_minor: 0, billing_currency: 'EUR' } });
      expect(
        await act.modelTurn({ tenantId: z.tenantId, eventId: z.eventId, plan: z.plan, exchanges: [] }),
      ).toEqual({
        kind: 'budget_exhausted',
      });
      expect(fake.requests).toHaveLength(0);
    });
  });

  describe('fencing and the pinned plan', () => {
    it('an attempt superseded between its claim and its commit audits nothing, but its spent tokens are counted', async () => {
      const s = await openai();
      fake.faults.push({ kind: 'delay', ms: 600 });
      const zombie = act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] });
      await waitFor(() => fake.requests.length === 1, { timeoutMs: 5000 });
      // A newer attempt claims the execution while the first one waits for the model.
      const newer = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId: s.tenantId }, (tx) =>
        claimExecutionFence(tx, {
          tenantId: s.tenantId,
          eventId: s.eventId,
          owner: 'newer-attempt',
          leaseSeconds: 60,
        }),
      );
      expect(newer).not.toBeNull();
      const err = await failureOf(zombie);
      expect(err.type).toBe('FencedOut');
      expect(err.nonRetryable).toBe(true);
      expect(fake.completions).toHaveLength(1);
      // The provider billed the call: the tenant's budget counts it, though its answer is dropped.
      const usage = await usageRows(s.tenantId);
      expect(usage).toHaveLength(1);
      expect(usage[0]).toMatchObject({ tokens_in: fake.completions[0]!.response.usage.prompt_tokens });
      expect(await auditOf(deps.sql, s.tenantId)).toHaveLength(0);
    });

    it('a message that is no longer running is fenced out before any call', async () => {
      const s = await openai();
      await deps.sql`update message_event set status = 'failed' where tenant_id = ${s.tenantId} and event_id = ${s.eventId}`;
      const err = await failureOf(
        act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      );
      expect(err.type).toBe('FencedOut');
      expect(fake.requests).toHaveLength(0);
    });

    it('a pinned model profile version that was not kept (profile changed since) is PlanDrift', async () => {
      const s = await openai();
      await deps.sql`update model_profile set version = 2, content_digest = ${'f'.repeat(64)}
                     where tenant_id = ${s.tenantId} and model_profile_id = ${s.modelProfileId}`;
      const err = await failureOf(
        act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      );
      expect(err.type).toBe('PlanDrift');
      expect(err.nonRetryable).toBe(true);
      expect(fake.requests).toHaveLength(0);
    });

    /** Keeps the profile's current content as its version row, as the admin API does. */
    const keepVersion = (tenantId: string, modelProfileId: string) => deps.sql`
      insert into model_profile_version (tenant_id, model_profile_id, version, provider, model, base_url,
                                         api_key_secret_ref, parameters, input_per_mtok_minor,
                                         output_per_mtok_minor, content_digest)
      select tenant_id, model_profile_id, version, provider, model, base_url, api_key_secret_ref, parameters,
             input_per_mtok_minor, output_per_mtok_minor, content_digest
      from model_profile where tenant_id = ${tenantId} and model_profile_id = ${modelProfileId}`;

    it('a profile edited since the plan was fixed: the turn runs on the pinned version', async () => {
      const s = await openai({ model: 'pinned-model' });
      await keepVersion(s.tenantId, s.modelProfileId);
      await deps.sql`update model_profile set version = 2, model = 'edited-model', base_url = 'http://127.0.0.1:9/v1',
                            input_per_mtok_minor = 0, output_per_mtok_minor = 0, content_digest = ${'e'.repeat(64)}
                     where tenant_id = ${s.tenantId} and model_profile_id = ${s.modelProfileId}`;
      await keepVersion(s.tenantId, s.modelProfileId);
      fake.enqueue('still pinned');
      expect(
        await act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, exchanges: [] }),
      ).toEqual({ kind: 'reply', text: 'still pinned' });
      expect(fake.requests.map((r) => r.model)).toEqual(['pinned-model']);
      // Priced by the pinned version too.
      const { prompt_tokens: tin, completion_tokens: tout } = fake.completions[0]!.response.usage;
      const [usage] = await usageRows(s.tenantId);
      expect(usage!.cost_minor).toBe(Math.ceil((tin * 300 + tout * 1500) / 1e6));
    });

    it('a kept version whose digest differs from the plan’s is PlanDrift', async () => {
      const s = await openai();
      const plan = { ...s.plan, modelProfile: { ...s.plan.modelProfile, digest: 'd'.repeat(64) } };
      await keepVersion(s.tenantId, s.modelProfileId);
      const err = await failureOf(
        act.modelTurn({ tenantId: s.tenantId, eventId: s.eventId, plan, exchanges: [] }),
      );
      expect(err.type).toBe('PlanDrift');
      expect(fake.requests).toHaveLength(0);
    });
  });
});
