import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeOpenAI, lastUserText, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type AdminTenant, api, ok, setupTenant, tenantPath } from '../helpers/admin';
import {
  createOpenAIProfile,
  finished,
  messagesOf,
  publishRevision,
  routeOf,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

const KEY = 'sk-config-0123456789abcdef';
const TOOL_DELAY_MS = 3000;

// "A configuration change affects only executions that start afterwards": an execution keeps the
// revision and the model profile version its ExecutionPlan pinned, even when a new revision is
// published or the profile is edited while it runs; the next message runs on the new ones.
describe('configuration changes during an execution', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let fake: FakeOpenAI;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    fake = await startFakeOpenAI({ apiKey: KEY });
    // Every call of the `slow` tool takes TOOL_DELAY_MS: the window in which configuration changes.
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: TOOL_DELAY_MS } : undefined));
    await h.startWorker({ sendTimeoutMs: 10_000 });
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await tools?.close();
    await fake?.close();
  });

  const slowTool = () => ({
    name: 'slow',
    description: 'A slow lookup',
    parameters: { type: 'object', properties: { q: { type: 'string' } } },
    endpoint_url: `${tools.url}/tools/slow`,
    side_effect: false,
    idempotency: 'none',
  });
  const toolPostsFor = (tenantMarker: string) =>
    tools.requests.filter((r) => r.endpoint === 'tool' && JSON.stringify(r.body).includes(tenantMarker));

  async function tenant(): Promise<AdminTenant> {
    const t = await setupTenant(h.app, { apiBaseUrl: telegram.url });
    telegram.addBot(t.bot.botToken);
    return t;
  }

  it('publishing a new revision while a message runs: it keeps revision 1, the next message uses revision 2', async () => {
    const t = await tenant();
    const marker = `m-${t.tenantId}`;
    const r1 = await publishRevision(h.app, t, {
      tools: [slowTool()],
      scripted: {
        rules: [
          {
            match: '.+',
            tool_call: { name: 'slow', arguments: { q: marker } },
            reply: 'revision 1: {{text}}',
          },
        ],
        default_reply: 'revision 1 default',
      },
    });
    const chatId = 63_001;
    await sendText(h, routeOf(t), chatId, 'first');
    await waitFor(() => toolPostsFor(marker).length === 1, { label: 'the tool call of the first message' });

    // While the first message waits for its tool, the operator publishes revision 2.
    const r2 = await publishRevision(h.app, t, {
      scripted: { rules: [], default_reply: 'revision 2: {{text}}' },
    });
    expect(r2).toBe(r1 + 1);
    const first = await messagesOf(h.sql, t.tenantId);
    expect(first.map((m) => m.status)).toEqual(['running']);
    await sendText(h, routeOf(t), chatId, 'second');

    await waitForMessage(h.sql, t.tenantId, 'second', finished);
    const rows = await messagesOf(h.sql, t.tenantId);
    expect(rows.map((m) => [m.text, m.status])).toEqual([
      ['first', 'replied'],
      ['second', 'replied'],
    ]);
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual(['revision 1: first', 'revision 2: second']);
    const plans = await Promise.all(
      rows.map(
        async (m) => (await ok(api(h.app, 'GET', tenantPath(t.tenantId, `/messages/${m.event_id}`)))).plan,
      ),
    );
    expect(plans.map((p) => p.app.revision)).toEqual([r1, r2]);
    // Revision 2 has no tool: the second message made no call.
    expect(toolPostsFor(marker)).toHaveLength(1);
  }, 60_000);

  it('editing the model profile while a message runs: its later turns still use the pinned version; the next message uses the new one', async () => {
    const t = await tenant();
    const profile = await createOpenAIProfile(h.app, t, {
      baseUrl: fake.baseURL,
      apiKey: KEY,
      model: `model-v1-${t.tenantId}`,
      pricing: { input_per_mtok_minor: 1_000_000, output_per_mtok_minor: 0 },
    });
    const mpId = profile.model_profile_id as string;
    const marker = `m-${t.tenantId}`;
    await publishRevision(h.app, { ...t, modelProfileId: mpId }, { tools: [slowTool()] });
    // The fake model: a tool call for "use the tool", then (and otherwise) an answer naming itself.
    fake.setResponder((req) => {
      const last = req.messages.at(-1);
      if (last?.role === 'user' && lastUserText(req) === 'use the tool')
        return { toolCalls: [{ name: 'slow', arguments: { q: marker } }] };
      return `answered by ${req.model}`;
    });
    const chatId = 63_002;
    await sendText(h, routeOf(t), chatId, 'use the tool');
    await waitFor(() => toolPostsFor(marker).length === 1, { label: 'the tool call of the first message' });

    // While the first message waits for its tool: a new model and new (zero) prices.
    const updated = await ok(
      api(h.app, 'PUT', tenantPath(t.tenantId, `/model-profiles/${mpId}`), {
        token: t.adminKey,
        body: {
          expected_version: 1,
          provider: 'openai_compatible',
          model: `model-v2-${t.tenantId}`,
          base_url: fake.baseURL,
          api_key_secret_ref: profile.api_key_secret_ref,
          pricing: { input_per_mtok_minor: 0, output_per_mtok_minor: 0 },
        },
      }),
    );
    expect(updated).toMatchObject({ version: 2 });
    expect(updated.content_digest).not.toBe(profile.content_digest);
    await sendText(h, routeOf(t), chatId, 'plain question');

    await waitForMessage(h.sql, t.tenantId, 'plain question', finished);
    const rows = await messagesOf(h.sql, t.tenantId);
    expect(rows.map((m) => [m.text, m.status, m.outcome])).toEqual([
      ['use the tool', 'replied', null],
      ['plain question', 'replied', null],
    ]);
    expect(telegram.sentTo(chatId).map((m) => m.text)).toEqual([
      `answered by model-v1-${t.tenantId}`,
      `answered by model-v2-${t.tenantId}`,
    ]);
    const models = fake.requests
      .filter((r) => String(r.model).endsWith(t.tenantId))
      .map((r) => String(r.model).slice(0, 8));
    expect(models).toEqual(['model-v1', 'model-v1', 'model-v2']);

    // Usage is priced by the version each turn ran on: v1 (1 minor unit per input token), v2 (free).
    const usage = await h.sql<{ event_id: string; tokens_in: number; cost_minor: number }[]>`
      select event_id, tokens_in, cost_minor from usage_event where tenant_id = ${t.tenantId} order by occurred_at`;
    expect(usage.map((u) => [u.event_id, u.cost_minor])).toEqual([
      [rows[0]!.event_id, usage[0]!.tokens_in],
      [rows[0]!.event_id, usage[1]!.tokens_in],
      [rows[1]!.event_id, 0],
    ]);
    const plans = await Promise.all(
      rows.map(
        async (m) => (await ok(api(h.app, 'GET', tenantPath(t.tenantId, `/messages/${m.event_id}`)))).plan,
      ),
    );
    expect(plans.map((p) => [p.modelProfile.version, p.modelProfile.digest])).toEqual([
      [1, profile.content_digest],
      [2, updated.content_digest],
    ]);
    // Both versions are kept, immutably.
    const versions = await h.sql<{ version: number; model: string; content_digest: string }[]>`
      select version, model, content_digest from model_profile_version
      where tenant_id = ${t.tenantId} and model_profile_id = ${mpId} order by version`;
    expect(versions).toEqual([
      { version: 1, model: `model-v1-${t.tenantId}`, content_digest: profile.content_digest },
      { version: 2, model: `model-v2-${t.tenantId}`, content_digest: updated.content_digest },
    ]);
    await expect(
      h.sql`update model_profile_version set model = 'x' where tenant_id = ${t.tenantId}`,
    ).rejects.toThrow('model_profile_version is append-only: UPDATE is not allowed');
  }, 60_000);
});
