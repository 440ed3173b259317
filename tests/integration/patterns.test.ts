import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type AdminTenant, api, ok, setupTenant, tenantPath } from '../helpers/admin';
import { finished, publishRevision, routeOf, sendText, waitForMessage } from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

// Tenant patterns (scripted rules, tool schema `pattern`s) end to end: what RE2 cannot run is
// refused when the revision is created, with the API's validation envelope, and creates nothing;
// a catastrophic pattern against a long attack text is answered through the real webhook, worker
// and Telegram delivery (on native RegExp the worker's event loop would never come back).
describe('tenant patterns', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let t: AdminTenant;

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    await h.startWorker({ sendTimeoutMs: 10_000 });
    t = await setupTenant(h.app, { telegram });
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await tools?.close();
  });

  const revisions = (appId: string) =>
    h.sql<{ n: number }[]>`select count(*)::int as n from agent_app_revision
                           where tenant_id = ${t.tenantId} and app_id = ${appId}`.then((r) => r[0]!.n);
  const lookupTool = (pattern: string) => ({
    name: 'lookup',
    description: 'Looks a code up',
    parameters: { type: 'object', properties: { code: { type: 'string', pattern } }, required: ['code'] },
    endpoint_url: `${tools.url}/tools/lookup`,
    side_effect: false,
    idempotency: 'none',
  });

  it('a revision with a rule or a schema pattern RE2 cannot run is a 400 naming it, and creates nothing', async () => {
    const as = { token: t.adminKey };
    const path = tenantPath(t.tenantId, `/apps/${t.appId}/revisions`);
    const before = await revisions(t.appId);
    const base = { model_profile_id: t.modelProfileId, system_prompt: 'You are helpful.' };

    const backref = await api(h.app, 'POST', path, {
      ...as,
      body: {
        ...base,
        scripted: {
          rules: [
            { match: '^hi$', reply: 'hello' },
            { match: '^(\\w+) \\1$', reply: 'you repeated {{1}}' },
          ],
        },
      },
    });
    expect(backref.status).toBe(400);
    expect(backref.body.error).toMatchObject({
      code: 'validation_failed',
      message: 'The request is invalid.',
    });
    expect(backref.body.error.details.fields).toEqual([
      { path: 'scripted.rules.1.match', message: 'rules[1]: backreferences (\\1, \\2, …) are not supported' },
    ]);

    const lookahead = await api(h.app, 'POST', path, {
      ...as,
      body: { ...base, tools: [lookupTool('^(?=\\d)\\w+$')] },
    });
    expect(lookahead.status).toBe(400);
    expect(lookahead.body.error.code).toBe('validation_failed');
    expect(lookahead.body.error.details.fields).toEqual([
      {
        path: 'tools.0.parameters.properties.code.pattern',
        message:
          'tool lookup: the pattern at /properties/code/pattern: lookahead ((?=…), (?!…)) is not supported',
      },
    ]);

    expect(await revisions(t.appId)).toBe(before);
    const audit = await h.sql<{ n: number }[]>`
      select count(*)::int as n from audit_log where tenant_id = ${t.tenantId} and action = 'app.revision.create'`;
    expect(audit[0]!.n).toBe(before);
    // The refusals took no revision number: the next valid revision follows the last one.
    const next = await ok(
      api(h.app, 'POST', path, {
        ...as,
        body: { ...base, scripted: { rules: [{ match: '^hi$', reply: 'x' }] } },
      }),
      201,
    );
    expect(next.revision).toBe(before + 1);
  });

  it('a catastrophic rule and schema pattern against long attack texts: every message is answered', async () => {
    await publishRevision(h.app, t, {
      tools: [lookupTool('^(a|a)*$')],
      scripted: {
        rules: [
          { match: '^(a|a)*$', reply: 'only a' },
          { match: '(x+x+)+y', reply: 'x then y' },
          {
            match: '^lookup (.+)$',
            tool_call: { name: 'lookup', arguments: { code: '{{1}}' } },
            reply: 'looked up: {{tool_result}}',
          },
        ],
        default_reply: 'no rule matched',
      },
    });
    // One chat per message: replies are read per chat, and no chat's pacing slows another.
    let chatId = 71_000;
    const answer = async (text: string): Promise<string> => {
      const chat = ++chatId;
      await sendText(h, routeOf(t), chat, text);
      expect((await waitForMessage(h.sql, t.tenantId, text, finished)).status).toBe('replied');
      await waitFor(() => telegram.sentTo(chat).length > 0, { label: `the reply to chat ${chat}` });
      return telegram
        .sentTo(chat)
        .map((m) => m.text)
        .join('');
    };

    expect(await answer(`${'a'.repeat(4000)}b`)).toBe('no rule matched');
    expect(await answer('a'.repeat(4000))).toBe('only a');
    expect(await answer('x'.repeat(4000))).toBe('no rule matched');
    // The rule's capture fails the tool's pattern on the attack: refused, never sent; a good code is.
    expect(await answer(`lookup ${'a'.repeat(3000)}b`)).toBe(
      'looked up: {"error":"invalid_arguments: /code must match pattern \\"^(a|a)*$\\""}',
    );
    expect(await answer('lookup aaaa')).toMatch(/^looked up: \{.*"result":\{"code":"aaaa"\}/);
    const posts = tools.requests.filter((r) => r.endpoint === 'tool');
    expect(posts.map((r) => r.body)).toEqual([{ code: 'aaaa' }]);
  }, 60_000);
});
