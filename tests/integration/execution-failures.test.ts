import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids';
import { BUDGET_EXHAUSTED_REPLY, MODEL_FAILED_REPLY } from '../../workflows/shared';
import { startServer } from '../fakes/http';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { api, configurationOf, ok, setupTenant, tenantPath } from '../helpers/admin';
import {
  activitiesOf,
  auditOfTenant,
  createOpenAIProfile,
  finished,
  publishRevision,
  routeOf,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';

const KEY = 'sk-failures-0123456789abcdef';

// Executions that cannot produce a model reply still answer the user, through the real workflow:
// a used-up monthly budget gets the fixed budget reply without calling the model (and without
// retrying), a provider that keeps sending malformed responses is retried and then gets the fixed
// "could not prepare a reply" text. Both messages end `failed` with their outcome.
describe('executions without a model reply', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let fake: FakeOpenAI;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    fake = await startFakeOpenAI({ apiKey: KEY });
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await fake?.close();
  });

  /** A tenant whose published revision uses an openai_compatible profile at `baseUrl`. */
  async function openAITenant(baseUrl: string) {
    const t = await setupTenant(h.app, { apiBaseUrl: telegram.url });
    telegram.addBot(t.bot.botToken);
    const profile = await createOpenAIProfile(h.app, t, {
      baseUrl,
      apiKey: KEY,
      pricing: { input_per_mtok_minor: 200, output_per_mtok_minor: 800 },
    });
    await publishRevision(h.app, { ...t, modelProfileId: profile.model_profile_id }, {});
    return { ...t, modelProfileId: profile.model_profile_id as string };
  }

  it('budget used up mid-month: the next message gets the fixed budget reply, the model is not called, no retries', async () => {
    const t = await openAITenant(fake.baseURL);
    const tenant = await ok(api(h.app, 'GET', tenantPath(t.tenantId)));
    await ok(
      api(h.app, 'PUT', tenantPath(t.tenantId, '/configuration'), {
        body: configurationOf(tenant, { monthly_token_budget: 1000, billing_currency: 'EUR' }),
      }),
    );
    // Earlier this month the tenant used 990 of its 1000 tokens.
    await h.sql`insert into usage_event (tenant_id, usage_id, model_profile_id, tokens_in, tokens_out, cost_minor, currency)
                values (${t.tenantId}, ${newId('use')}, ${t.modelProfileId}, 900, 90, 0, 'EUR')`;
    fake.setResponder((req) => `model answer ${req.messages.length}`);
    const chatId = 62_001;

    // Within budget: the model answers, and its usage crosses the budget.
    await sendText(h, routeOf(t), chatId, 'first question');
    const first = await waitForMessage(h.sql, t.tenantId, 'first question', finished);
    expect(first.status).toBe('replied');
    const calls = fake.requests.length;
    expect(calls).toBeGreaterThan(0);
    const usage = await ok(api(h.app, 'GET', tenantPath(t.tenantId, '/usage'), { token: t.viewerKey }));
    expect(usage.tokens_in + usage.tokens_out).toBeGreaterThanOrEqual(1000);

    await sendText(h, routeOf(t), chatId, 'second question');
    const second = await waitForMessage(h.sql, t.tenantId, 'second question', finished);
    expect(second).toMatchObject({ status: 'failed', outcome: 'budget_exhausted' });
    const detail = await ok(api(h.app, 'GET', tenantPath(t.tenantId, `/messages/${second.event_id}`)));
    expect(detail).toMatchObject({ status: 'failed', outcome: 'budget_exhausted' });
    // What the user sees: the fixed text, delivered through the normal outbox.
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual([
      expect.stringMatching(/^model answer/),
      BUDGET_EXHAUSTED_REPLY,
    ]);
    expect(detail.reply_segments).toEqual([
      expect.objectContaining({ status: 'sent', content: BUDGET_EXHAUSTED_REPLY }),
    ]);
    // The model was not called for it, and the refusal was one decision, not a retry storm.
    expect(fake.requests).toHaveLength(calls);
    expect(await activitiesOf(h, second.workflow_id)).toMatchObject({
      modelTurn: { scheduled: 1, lastAttempt: 1, failureType: null },
    });
    const refusals = (await auditOfTenant(h.sql, t.tenantId)).filter(
      (a) => a.action === 'model.turn' && a.decision === 'budget_exhausted',
    );
    expect(refusals).toEqual([expect.objectContaining({ error_type: 'token_budget' })]);
    const [finish] = (await auditOfTenant(h.sql, t.tenantId)).filter(
      (a) => a.action === 'message.finished' && a.details.event_id === second.event_id,
    );
    expect(finish).toMatchObject({ decision: 'failed', reason: 'budget_exhausted' });
  }, 60_000);

  it('malformed model responses (200 with garbage, no choices): retried, then the fixed reply, outcome model_failed', async () => {
    const bodies = ['this is not json', '{"id":"x","object":"chat.completion","choices":[]}', '{}'];
    const received: IncomingMessage['url'][] = [];
    const broken = await startServer((req, res) => {
      received.push(req.url);
      const body = bodies[(received.length - 1) % bodies.length]!;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    try {
      const t = await openAITenant(`${broken.url}/v1`);
      const chatId = 62_002;
      await sendText(h, routeOf(t), chatId, 'are you there?');
      const msg = await waitForMessage(h.sql, t.tenantId, 'are you there?', finished, 60_000);
      expect(msg).toMatchObject({ status: 'failed', outcome: 'model_failed' });
      expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual([MODEL_FAILED_REPLY]);

      // Retryable: every attempt of the activity's retry policy (5) called the provider once, then
      // the workflow gave up on the model and delivered the fixed reply.
      expect(received).toHaveLength(5);
      expect(received.every((u) => u === '/v1/chat/completions')).toBe(true);
      expect(await activitiesOf(h, msg.workflow_id)).toMatchObject({
        modelTurn: { scheduled: 1, lastAttempt: 5, failureType: 'ModelRetryable' },
      });
      const usage = await h.sql`select 1 from usage_event where tenant_id = ${t.tenantId}`;
      expect(usage).toHaveLength(0);
      const detail = await ok(api(h.app, 'GET', tenantPath(t.tenantId, `/messages/${msg.event_id}`)));
      expect(detail).toMatchObject({ status: 'failed', outcome: 'model_failed', segment_count: 1 });
    } finally {
      await broken.close();
    }
  }, 90_000);
});
