import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids';
import { reopenForRetry } from '../../db/queries/dlq-retry';
import { withTenantTx } from '../../db/tx';
import { deliveryRetryWorkflowId } from '../../workflows/shared';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import {
  type AdminTenant,
  api,
  createTenant,
  type Json,
  ok,
  setupTenant,
  tenantPath,
} from '../helpers/admin';
import {
  auditOfTenant,
  finished,
  invocationsOfTenant,
  messagesOf,
  publishRevision,
  routeOf,
  sendText,
  waitForInvocation,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness } from '../helpers/harness';

// Operators in the loop, end to end on real PostgreSQL and Temporal: a tool outcome nobody could
// establish waits in `manual` until resolved through the admin API, calls that need approval wait
// for an approve/deny decision or their deadline, and a dead-lettered delivery is retried. Every
// decision is a CAS audited in its transaction, and the waiting workflow is signalled.
describe('operator decisions through the admin API', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let t: AdminTenant;
  /** A key of another tenant: every route of `t` must answer it 404. */
  let otherKey: string;

  const as = () => ({ token: t.adminKey });
  const viewer = () => ({ token: t.viewerKey });
  const at = (rest: string) => tenantPath(t.tenantId, rest);
  const eventIdOf = (text: string) => async () =>
    (await messagesOf(h.sql, t.tenantId)).find((m) => m.text === text)?.event_id ?? '';
  const sentTexts = (chatId: number) => telegram.sentTo(chatId).map((m) => m.text);
  /** A reply rendered from `<Label>: {{tool_result}}`: the label and the parsed result (key order is not kept). */
  const toolReply = (text: string): [string, unknown] => {
    const at = text.indexOf(': ');
    return [text.slice(0, at), JSON.parse(text.slice(at + 2))];
  };
  const posts = (tool: string) => tools.requests.filter((r) => r.endpoint === 'tool' && r.tool === tool);

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    await h.startWorker();
    t = await setupTenant(h.app, { apiBaseUrl: telegram.url });
    telegram.addBot(t.bot.botToken);
    const other = await createTenant(h.app);
    otherKey = (
      await ok(
        api(h.app, 'POST', tenantPath(other.tenant_id, '/api-keys'), { body: { role: 'tenant_admin' } }),
        201,
      )
    ).key;
    const receiptTool = (name: string, extra: Record<string, unknown> = {}) => ({
      name,
      description: `${name} (test tool)`,
      parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
      endpoint_url: `${tools.url}/tools/${name}`,
      side_effect: true,
      idempotency: 'provider_key',
      receipt_url: `${tools.url}/receipts/{key}`,
      ...extra,
    });
    await publishRevision(h.app, t, {
      tools: [
        {
          name: 'send_fax',
          description: 'Sends a fax: no provider idempotency, no receipts',
          parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
          endpoint_url: `${tools.url}/tools/send_fax`,
          side_effect: true,
          idempotency: 'none',
        },
        receiptTool('refund', { requires_approval: true, approval_timeout_s: 30 }),
        receiptTool('wipe', { requires_approval: true, approval_timeout_s: 2 }),
      ],
      scripted: {
        rules: [
          {
            match: '^fax (.+)$',
            tool_call: { name: 'send_fax', arguments: { to: '{{1}}' } },
            reply: 'Fax: {{tool_result}}',
          },
          {
            match: '^refund (.+)$',
            tool_call: { name: 'refund', arguments: { ref: '{{1}}' } },
            reply: 'Refund: {{tool_result}}',
          },
          {
            match: '^wipe (.+)$',
            tool_call: { name: 'wipe', arguments: { ref: '{{1}}' } },
            reply: 'Wipe: {{tool_result}}',
          },
        ],
        default_reply: 'You said: {{text}}',
      },
    });
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await tools?.close();
  });

  it('unknown → manual → resolved: listed as manual, resolved once through the API, the workflow replies with the receipt', async () => {
    const chatId = 61_001;
    const text = 'fax +4712345678';
    tools.faults.push({ kind: 'apply_then_drop' });
    await sendText(h, routeOf(t), chatId, text);

    // No receipt_url and no provider idempotency: the dropped call cannot be reconciled → manual.
    const inv = await waitForInvocation(h.sql, t.tenantId, eventIdOf(text), (i) => i.status === 'manual');
    expect(inv).toMatchObject({
      tool_name: 'send_fax',
      attempts: 1,
      last_error: 'unknown_outcome_no_receipt_url',
    });
    const listed = await ok(api(h.app, 'GET', at('/tool-invocations?status=manual'), viewer()));
    expect(listed.items.map((i: Json) => i.invocation_id)).toContain(inv.invocation_id);
    expect(listed.items.find((i: Json) => i.invocation_id === inv.invocation_id)).toMatchObject({
      status: 'manual',
      resolved_at: null,
      resolution: null,
    });
    const msg = await waitForMessage(h.sql, t.tenantId, text, (m) => m.status === 'running');
    // …and visible in the DLQ as a tool dead letter until an operator decides.
    const letters = await ok(api(h.app, 'GET', at('/dead-letters'), viewer()));
    expect(letters.items.filter((d: Json) => d.kind === 'tool')).toEqual([
      expect.objectContaining({ event_id: msg.event_id, reason_class: 'unknown_outcome', status: 'open' }),
    ]);

    // Roles and tenancy: a viewer may not resolve (403), another tenant's key sees nothing (404),
    // a malformed body is 400 — and none of them changes anything.
    const path = at(`/tool-invocations/${inv.invocation_id}/resolution`);
    const body = {
      outcome: 'accepted',
      reason: 'confirmed by phone with the recipient',
      provider_receipt: { fax_id: 'F-77', pages: 2 },
    };
    // Discarding the tool's dead letter alone would strand the message: refused while it waits.
    const toolLetter = letters.items.find((d: Json) => d.kind === 'tool');
    const discard = await api(h.app, 'POST', at(`/dead-letters/${toolLetter.dead_letter_id}/discard`), {
      ...as(),
      body: { reason: 'handled elsewhere' },
    });
    expect([discard.status, discard.body.error.code]).toEqual([409, 'invalid_transition']);
    const auditBefore = (await auditOfTenant(h.sql, t.tenantId)).length;
    const refused = [
      await api(h.app, 'POST', path, { ...viewer(), body }),
      await api(h.app, 'POST', path, { token: otherKey, body }),
      await api(h.app, 'POST', path, { ...as(), body: { ...body, outcome: 'maybe' } }),
      await api(h.app, 'POST', path, { ...as(), body: { ...body, status: 'accepted' } }),
      await api(h.app, 'POST', at('/tool-invocations/inv_unknown/resolution'), { ...as(), body }),
    ];
    expect(refused.map((r) => [r.status, r.body.error.code])).toEqual([
      [403, 'forbidden'],
      [404, 'not_found'],
      [400, 'validation_failed'],
      [400, 'validation_failed'],
      [404, 'not_found'],
    ]);
    expect(
      (await invocationsOfTenant(h.sql, t.tenantId)).find((i) => i.invocation_id === inv.invocation_id),
    ).toMatchObject({ status: 'manual', resolution: null });
    expect(await auditOfTenant(h.sql, t.tenantId)).toHaveLength(auditBefore);

    const resolved = await ok(api(h.app, 'POST', path, { ...as(), body }));
    expect(resolved).toMatchObject({
      invocation_id: inv.invocation_id,
      status: 'accepted',
      resolution: body,
      resolved_at: expect.any(String),
    });

    const settled = await ok(api(h.app, 'GET', at('/dead-letters'), viewer()));
    expect(settled.items.filter((d: Json) => d.kind === 'tool').map((d: Json) => d.status)).toEqual([
      'discarded',
    ]);

    // The signalled workflow continues: the scripted reply renders the operator's receipt.
    await waitForMessage(h.sql, t.tenantId, text, (m) => m.status === 'replied');
    expect(sentTexts(chatId).map(toolReply)).toEqual([['Fax', { fax_id: 'F-77', pages: 2 }]]);
    // Applied once at the provider, never sent again.
    expect(posts('send_fax')).toHaveLength(1);
    expect(tools.effectCount(inv.idempotency_key)).toBe(1);

    const audit = await auditOfTenant(h.sql, t.tenantId);
    expect(audit.filter((a) => a.action === 'tool_invocation.resolve')).toEqual([
      expect.objectContaining({
        decision: 'resolved',
        actor_type: 'api_key',
        actor_id: t.adminKeyId,
        tool_name: 'send_fax',
        reason: body.reason,
        details: expect.objectContaining({
          invocation_id: inv.invocation_id,
          event_id: msg.event_id,
          outcome: 'accepted',
        }),
      }),
    ]);

    // A second resolution is an invalid transition and changes nothing.
    const rowBefore = (await invocationsOfTenant(h.sql, t.tenantId)).find(
      (i) => i.invocation_id === inv.invocation_id,
    );
    const auditCount = (await auditOfTenant(h.sql, t.tenantId)).length;
    const again = await api(h.app, 'POST', path, {
      ...as(),
      body: { outcome: 'rejected', reason: 'changed my mind' },
    });
    expect([again.status, again.body.error.code]).toEqual([409, 'invalid_transition']);
    expect(
      (await invocationsOfTenant(h.sql, t.tenantId)).find((i) => i.invocation_id === inv.invocation_id),
    ).toEqual(rowBefore);
    expect(await auditOfTenant(h.sql, t.tenantId)).toHaveLength(auditCount);
    expect(sentTexts(chatId)).toHaveLength(1);
  }, 60_000);

  describe('approval', () => {
    it('granted: the call is dispatched once after the approval and the reply carries its receipt', async () => {
      const chatId = 61_002;
      const text = 'refund A-1';
      await sendText(h, routeOf(t), chatId, text);
      const inv = await waitForInvocation(
        h.sql,
        t.tenantId,
        eventIdOf(text),
        (i) => i.status === 'awaiting_approval',
      );
      const waiting = await ok(api(h.app, 'GET', at('/tool-invocations?status=awaiting_approval'), viewer()));
      const item = waiting.items.find((i: Json) => i.invocation_id === inv.invocation_id);
      expect(item).toMatchObject({ requires_approval: true, approval_deadline: expect.any(String) });
      expect(posts('refund')).toHaveLength(0);

      const path = at(`/tool-invocations/${inv.invocation_id}/approval`);
      const body = { decision: 'approve', reason: 'customer identity verified' };
      expect((await api(h.app, 'POST', path, { ...viewer(), body })).status).toBe(403);
      expect((await api(h.app, 'POST', path, { token: otherKey, body })).status).toBe(404);
      // The resolution route is for manual invocations only.
      const wrongRoute = await api(h.app, 'POST', at(`/tool-invocations/${inv.invocation_id}/resolution`), {
        ...as(),
        body: { outcome: 'accepted', reason: 'x' },
      });
      expect([wrongRoute.status, wrongRoute.body.error.code]).toEqual([409, 'invalid_transition']);

      const approved = await ok(api(h.app, 'POST', path, { ...as(), body }));
      expect(approved).toMatchObject({ invocation_id: inv.invocation_id, status: 'prepared' });

      await waitForMessage(h.sql, t.tenantId, text, (m) => m.status === 'replied');
      const receipt = tools.receipt(inv.idempotency_key)!;
      expect(receipt).toMatchObject({ tool: 'refund', result: { ref: 'A-1' } });
      expect(sentTexts(chatId).map(toolReply)).toEqual([['Refund', receipt]]);
      expect(posts('refund').filter((r) => r.key === inv.idempotency_key)).toHaveLength(1);
      expect(tools.effectCount(inv.idempotency_key)).toBe(1);
      const done = (await invocationsOfTenant(h.sql, t.tenantId)).find(
        (i) => i.invocation_id === inv.invocation_id,
      );
      expect(done).toMatchObject({ status: 'accepted', attempts: 1 });

      const again = await api(h.app, 'POST', path, { ...as(), body: { decision: 'deny', reason: 'late' } });
      expect([again.status, again.body.error.code]).toEqual([409, 'invalid_transition']);
      const decisions = (await auditOfTenant(h.sql, t.tenantId)).filter(
        (a) => a.details.invocation_id === inv.invocation_id,
      );
      expect(decisions.map((a) => [a.action, a.decision])).toEqual([
        ['tool.invocation', 'awaiting_approval'],
        ['tool_invocation.approval', 'approved'],
        ['tool.invocation', 'accepted'],
      ]);
    }, 60_000);

    it('denied: never dispatched; the reply tells the user it was rejected and why', async () => {
      const chatId = 61_003;
      const text = 'refund B-2';
      await sendText(h, routeOf(t), chatId, text);
      const inv = await waitForInvocation(
        h.sql,
        t.tenantId,
        eventIdOf(text),
        (i) => i.status === 'awaiting_approval',
      );
      const denied = await ok(
        api(h.app, 'POST', at(`/tool-invocations/${inv.invocation_id}/approval`), {
          ...as(),
          body: { decision: 'deny', reason: 'not eligible' },
        }),
      );
      expect(denied).toMatchObject({
        status: 'rejected',
        resolution: { decision: 'deny', reason: 'not eligible' },
      });
      await waitForMessage(h.sql, t.tenantId, text, (m) => m.status === 'replied');
      expect(sentTexts(chatId).map(toolReply)).toEqual([
        ['Refund', { error: 'rejected', reason: 'not eligible' }],
      ]);
      expect(posts('refund').filter((r) => r.key === inv.idempotency_key)).toHaveLength(0);
      const audit = await auditOfTenant(h.sql, t.tenantId);
      expect(
        audit.filter((a) => a.details.invocation_id === inv.invocation_id).map((a) => a.decision),
      ).toEqual(['awaiting_approval', 'refused']);
    }, 60_000);

    it('timed out: the invocation fails with approval_timeout, the reply still goes out, a late approval is 409', async () => {
      const chatId = 61_004;
      const text = 'wipe disk-9';
      await sendText(h, routeOf(t), chatId, text);
      const inv = await waitForInvocation(
        h.sql,
        t.tenantId,
        eventIdOf(text),
        (i) => i.status === 'awaiting_approval',
      );
      // Nobody decides within approval_timeout_s (2 s): the workflow's timer fails the call.
      const msg = await waitForMessage(h.sql, t.tenantId, text, finished);
      expect(msg).toMatchObject({ status: 'replied', outcome: null });
      expect(sentTexts(chatId).map(toolReply)).toEqual([['Wipe', { error: 'approval_timeout' }]]);
      const row = (await invocationsOfTenant(h.sql, t.tenantId)).find(
        (i) => i.invocation_id === inv.invocation_id,
      );
      expect(row).toMatchObject({ status: 'failed', last_error: 'approval_timeout', attempts: 0 });
      expect(posts('wipe')).toHaveLength(0);

      const late = await api(h.app, 'POST', at(`/tool-invocations/${inv.invocation_id}/approval`), {
        ...as(),
        body: { decision: 'approve', reason: 'too late' },
      });
      expect([late.status, late.body.error.code]).toEqual([409, 'invalid_transition']);
      const audit = await auditOfTenant(h.sql, t.tenantId);
      expect(
        audit
          .filter((a) => a.details.invocation_id === inv.invocation_id)
          .map((a) => [a.decision, a.error_type]),
      ).toEqual([
        ['awaiting_approval', null],
        ['failed', 'approval_timeout'],
      ]);
    }, 60_000);
  });

  describe('dead-letter retry', () => {
    it('tool dead letters, and execution ones of a message that is not failed, are not retried (409, nothing changed); roles and tenancy apply', async () => {
      await sendText(h, routeOf(t), 61_006, 'just a message');
      const msg = await waitForMessage(h.sql, t.tenantId, 'just a message', finished);
      const ids = { execution: newId('dl'), tool: newId('dl') };
      const invocationId = newId('inv');
      // Written as the schema owner: no execution here produces these two kinds on purpose.
      await h.sql`insert into tool_invocation (tenant_id, invocation_id, event_id, session_id, tool_name,
                                               tool_capability_digest, idempotency_key, request_digest, status)
                  select tenant_id, ${invocationId}, event_id, session_id, 'send_fax', ${'a'.repeat(64)},
                         ${`key-${invocationId}`}, ${'b'.repeat(64)}, 'manual'
                  from message_event where tenant_id = ${t.tenantId} and event_id = ${msg.event_id}`;
      await h.sql`insert into dead_letter (tenant_id, dead_letter_id, event_id, kind, invocation_id, reason_class)
                  values (${t.tenantId}, ${ids.execution}, ${msg.event_id}, 'execution', null, 'lease_lost'),
                         (${t.tenantId}, ${ids.tool}, ${msg.event_id}, 'tool', ${invocationId}, 'unknown_outcome')`;
      for (const id of [ids.execution, ids.tool]) {
        const path = at(`/dead-letters/${id}/retry`);
        const res = await api(h.app, 'POST', path, { ...as(), body: { reason: 'try again' } });
        expect([res.status, res.body.error.code]).toEqual([409, 'invalid_transition']);
        expect(res.body.error.message).toMatch(id === ids.tool ? /resolution route/ : /not failed/);
        expect((await api(h.app, 'POST', path, { ...viewer(), body: {} })).status).toBe(403);
        expect((await api(h.app, 'POST', path, { token: otherKey, body: {} })).status).toBe(404);
      }
      const unknown = await api(h.app, 'POST', at(`/dead-letters/${newId('dl')}/retry`), {
        ...as(),
        body: {},
      });
      expect(unknown.status).toBe(404);
      const rows = await h.sql`select status, resolved_at from dead_letter
                               where tenant_id = ${t.tenantId} and dead_letter_id in ${h.sql([ids.execution, ids.tool])}`;
      expect(rows.map((r) => r.status)).toEqual(['open', 'open']);
      expect(
        (await auditOfTenant(h.sql, t.tenantId)).filter((a) => a.action === 'dead_letter.retry'),
      ).toHaveLength(0);
    });

    it('a retry whose delivery run never started (crash after the reopen) is started by posting it again, once', async () => {
      const chatId = 61_005;
      const text = 'hello blocked';
      telegram.blockChat(chatId);
      await sendText(h, routeOf(t), chatId, text);
      const msg = await waitForMessage(h.sql, t.tenantId, text, finished);
      expect(msg).toMatchObject({ status: 'failed', outcome: 'delivery_failed' });
      const [dl] = await h.sql<{ dead_letter_id: string }[]>`
        select dead_letter_id from dead_letter where tenant_id = ${t.tenantId} and event_id = ${msg.event_id}`;
      telegram.unblockChat(chatId);

      // The reopen committed, then the API died before starting the delivery run.
      const plan = await withTenantTx(h.sql, { role: 'tenant_admin_writer', tenantId: t.tenantId }, (tx) =>
        reopenForRetry(tx, {
          tenantId: t.tenantId,
          deadLetterId: dl!.dead_letter_id,
          actor: 'ops',
          reason: null,
          workflowId: deliveryRetryWorkflowId(t.tenantId, dl!.dead_letter_id),
        }),
      );
      expect(plan).toMatchObject({ eventId: msg.event_id });

      const path = at(`/dead-letters/${dl!.dead_letter_id}/retry`);
      const res = await api(h.app, 'POST', path, { ...as(), body: { reason: 'start the lost run' } });
      expect(res.status, res.text).toBe(202);
      expect(res.body).toMatchObject({ dead_letter_id: dl!.dead_letter_id, status: 'retried' });
      const result = await h.temporal.workflow.getHandle(res.body.retry_workflow_id).result();
      expect(result).toMatchObject({ status: 'replied', segmentsSent: 1 });
      expect(sentTexts(chatId)).toEqual(['You said: hello blocked']);
      await waitForMessage(h.sql, t.tenantId, text, (m) => m.status === 'replied');

      // Again: the run exists (and the message is no longer waiting): 409, nothing sent twice.
      const again = await api(h.app, 'POST', path, { ...as(), body: {} });
      expect([again.status, again.body.error.code]).toEqual([409, 'invalid_transition']);
      await new Promise((r) => setTimeout(r, 500));
      expect(sentTexts(chatId)).toHaveLength(1);
      const audit = (await auditOfTenant(h.sql, t.tenantId)).filter((a) => a.action === 'dead_letter.retry');
      expect(audit.map((a) => a.decision)).toEqual(['restarted']);
    }, 60_000);
  });
});
