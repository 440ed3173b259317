import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type AdminTenant, api, type Json, ok, setupTwoTenants, tenantPath } from '../helpers/admin';
import { createHarness, type Harness } from '../helpers/harness';
import { orderToolAgent } from '../helpers/seed';
import { waitFor } from '../helpers/wait';

// A message's life (issue #16) as the timeline route tells it: one scripted message through a
// side-effecting tool and a reply, on a console binding, with every entry from a stored timestamp.
describe('message timeline', () => {
  let h: Harness;
  let a: AdminTenant;
  let b: AdminTenant;
  let tools: FakeToolProvider;
  let bindingId: string;

  beforeAll(async () => {
    h = await createHarness();
    tools = await startFakeToolProvider();
    ({ a, b } = await setupTwoTenants(h.app));
    const as = { token: a.adminKey };
    const rev = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, `/apps/${a.appId}/revisions`), {
        ...as,
        body: {
          model_profile_id: a.modelProfileId,
          system_prompt: 'Take orders.',
          ...orderToolAgent(tools.url),
        },
      }),
      201,
    );
    const app = await ok(api(h.app, 'GET', tenantPath(a.tenantId, `/apps/${a.appId}`), as));
    await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, `/apps/${a.appId}/publish`), {
        ...as,
        body: { revision: rev.revision, expected_version: app.version },
      }),
    );
    const binding = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, '/bindings'), {
        ...as,
        body: { channel: 'console', app_id: a.appId, activate: true },
      }),
      201,
    );
    bindingId = binding.binding_id;
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await tools?.close();
  });

  async function sendAndFinish(conversation: string, text: string): Promise<string> {
    const sent = await ok(
      api(h.app, 'POST', tenantPath(a.tenantId, `/bindings/${bindingId}/console/messages`), {
        token: a.adminKey,
        body: { conversation_id: conversation, text },
      }),
      202,
    );
    await waitFor(
      async () => {
        const [row] = await h.sql`select status from message_event where event_id = ${sent.event_id}`;
        return row?.status === 'replied' || row?.status === 'failed';
      },
      { timeoutMs: 30_000, label: 'message finished' },
    );
    return sent.event_id;
  }
  const timeline = (eventId: string, token = a.viewerKey, tenantId = a.tenantId) =>
    api(h.app, 'GET', tenantPath(tenantId, `/messages/${eventId}/timeline`), { token });

  it('tells received → workflow → tool → commit → segment sent → finished, in time order', async () => {
    const eventId = await sendAndFinish('orders', 'order apple');
    const t = await ok(timeline(eventId));
    expect(t).toMatchObject({ event_id: eventId, status: 'replied', dead_letters: [] });
    expect(t.workflow_id).toMatch(/^msg-/);
    expect(t.temporal_ui_url).toBe(
      `http://127.0.0.1:8233/namespaces/default/workflows/${encodeURIComponent(t.workflow_id)}`,
    );
    expect(t.plan).toMatchObject({ tenant: { id: a.tenantId }, app: { id: a.appId } });

    const entries = t.entries as Json[];
    const steps = entries.map((e) => `${e.kind}:${e.state}`);
    // Each entry carries the timestamp stored for it (not the time of the read, not a guess).
    const [stored] = await h.sql`
      select to_char(e.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as received,
             to_char(o.sent_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sent
      from message_event e join reply_outbox o on o.tenant_id = e.tenant_id and o.event_id = e.event_id
      where e.tenant_id = ${a.tenantId} and e.event_id = ${eventId}`;
    const atOf = (step: string) => entries[steps.indexOf(step)]?.at;
    expect(Date.parse(atOf('received:received'))).toBe(Date.parse(stored!.received));
    expect(Date.parse(atOf('segment:sent'))).toBe(Date.parse(stored!.sent));
    expect(steps[0]).toBe('received:received');
    expect(steps.at(-1), steps.join(', ')).toBe('finished:replied');
    const order = [
      'received:received',
      'workflow_started:started',
      'tool_invocation:prepared',
      'tool_invocation:dispatched',
      'commit:committed',
      'segment:sent',
      'finished:replied',
    ];
    const positions = order.map((s) => steps.indexOf(s));
    expect(positions, steps.join(', ')).not.toContain(-1);
    expect(positions).toEqual([...positions].sort((x, y) => x - y));
    // The tool's decision is audited by the worker, between its dispatch and the commit.
    const accepted = steps.indexOf('tool_invocation:accepted');
    expect(accepted, steps.join(', ')).toBeGreaterThan(steps.indexOf('tool_invocation:dispatched'));
    expect(accepted).toBeLessThan(steps.indexOf('commit:committed'));
    expect(entries.find((e) => e.kind === 'tool_invocation')!.detail.tool_name).toBe('order');
    expect(entries.find((e) => e.kind === 'segment')!.detail).toMatchObject({
      segment_index: 0,
      receipt: { console: true },
    });
    // The operator's send is part of its life too.
    expect(steps).toContain('audit:console.message');
  });

  it("a later message of the conversation shows its wait in the session lane when it had one, and another tenant's event is 404", async () => {
    const eventId = await sendAndFinish('orders', 'order pear');
    const t = await ok(timeline(eventId, a.adminKey));
    const lane = (t.entries as Json[]).filter((e) => e.kind === 'session_lane');
    // It was sent after the first one finished: no wait to show.
    expect(lane).toEqual([]);

    // Two back to back, the first with a slow tool: the second waits in the lane until it finished.
    let calls = 0;
    tools.setFaultPlan(() => (calls++ === 0 ? { kind: 'delay', ms: 1_500 } : undefined));
    try {
      const send = (text: string) =>
        ok(
          api(h.app, 'POST', tenantPath(a.tenantId, `/bindings/${bindingId}/console/messages`), {
            token: a.adminKey,
            body: { conversation_id: 'lane', text },
          }),
          202,
        );
      const first = await send('order plum');
      const second = await send('order fig');
      await waitFor(
        async () => {
          const rows = await h.sql`
            select 1 from message_event where event_id in (${first.event_id}, ${second.event_id})
              and status in ('replied', 'failed')`;
          return rows.length === 2;
        },
        { timeoutMs: 30_000, label: 'both finished' },
      );
      const [firstT, secondT] = [await ok(timeline(first.event_id)), await ok(timeline(second.event_id))];
      expect((firstT.entries as Json[]).filter((e) => e.kind === 'session_lane')).toEqual([]);
      const entries = secondT.entries as Json[];
      const steps = entries.map((e) => `${e.kind}:${e.state}`);
      expect(entries.filter((e) => e.kind === 'session_lane')).toEqual([
        expect.objectContaining({ state: 'released', detail: { after_event_id: first.event_id } }),
      ]);
      const released = entries[steps.indexOf('session_lane:released')]!;
      const firstFinished = (firstT.entries as Json[]).find((e) => e.kind === 'finished')!;
      // Released when the first finished: after the second was received, before it committed.
      expect(released.at).toBe(firstFinished.at);
      expect(Date.parse(released.at)).toBeGreaterThan(Date.parse(entries[0]!.at));
      expect(steps.indexOf('session_lane:released')).toBeGreaterThan(steps.indexOf('received:received'));
      expect(steps.indexOf('session_lane:released')).toBeLessThan(steps.indexOf('commit:committed'));
    } finally {
      tools.setFaultPlan(undefined);
    }

    for (const [token, tenantId] of [
      [b.adminKey, b.tenantId],
      [b.viewerKey, a.tenantId],
    ] as const) {
      const res = await timeline(eventId, token, tenantId);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    expect((await timeline('evt_nope')).status).toBe(404);
  });
});
