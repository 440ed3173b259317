import { ApplicationFailure } from '@temporalio/common';
import type { TransactionSql } from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { toolIdempotencyKey } from '../../activities/tool-calls/record';
import { toolActivities } from '../../activities/tools';
import type { ToolCall } from '../../agents/messages';
import { withTenantTx } from '../../db/tx';
import { contentDigest } from '../../lib/digest';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import {
  auditOf,
  createTestDeps,
  type ExecutionSeed,
  invocationsOf,
  seedExecution,
  type TestDeps,
} from '../helpers/execution-seed';
import { waitFor } from '../helpers/wait';

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

describe('tool invocations', () => {
  let deps: TestDeps;
  let tp: FakeToolProvider;
  let act: ReturnType<typeof toolActivities>;

  beforeAll(async () => {
    deps = createTestDeps({ sendTimeoutMs: 1500 });
    tp = await startFakeToolProvider();
    act = toolActivities(deps);
  });
  afterAll(async () => {
    await tp?.close();
    await deps?.close();
  });
  beforeEach(() => {
    tp.clearFaults();
    tp.requests.length = 0;
    for (const name of ['create_order', 'send_fax', 'notify', 'refund', 'lookup']) tp.acceptTool(name);
  });

  const orderSchema = {
    type: 'object',
    properties: { item: { type: 'string' }, qty: { type: 'integer', minimum: 1 } },
    required: ['item', 'qty'],
    additionalProperties: false,
  };
  const tools = () => [
    {
      name: 'create_order',
      description: 'Places an order',
      parameters: orderSchema,
      endpoint_url: `${tp.url}/tools/create_order`,
      side_effect: true,
      idempotency: 'provider_key',
      receipt_url: `${tp.url}/receipts/{key}`,
    },
    {
      name: 'send_fax',
      description: 'Sends a fax (no receipts)',
      parameters: { type: 'object' },
      endpoint_url: `${tp.url}/tools/send_fax`,
      side_effect: true,
      idempotency: 'none',
    },
    {
      name: 'notify',
      description: 'Receipts, but no provider idempotency',
      parameters: { type: 'object' },
      endpoint_url: `${tp.url}/tools/notify`,
      side_effect: true,
      idempotency: 'none',
      receipt_url: `${tp.url}/receipts/{key}`,
    },
    {
      name: 'refund',
      description: 'Refunds an order (needs an operator)',
      parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
      endpoint_url: `${tp.url}/tools/refund`,
      side_effect: true,
      idempotency: 'provider_key',
      receipt_url: `${tp.url}/receipts/{key}`,
      requires_approval: true,
      approval_timeout_s: 60,
    },
    {
      name: 'lookup',
      description: 'Reads an order (no side effect)',
      parameters: { type: 'object' },
      endpoint_url: `${tp.url}/tools/lookup`,
      side_effect: false,
      idempotency: 'none',
      reconcile_window_s: 30,
    },
  ];

  const seed = () => seedExecution(deps.sql, deps.secrets, { tools: tools() });
  const invoke = (s: ExecutionSeed, call: ToolCall, step = 0) =>
    act.invokeTool({ tenantId: s.tenantId, eventId: s.eventId, plan: s.plan, call, step });
  /** The Idempotency-Key of order()'s call at this step (the first call of its turn). */
  const keyOf = (eventId: string, step: number, call: ToolCall = order()) =>
    toolIdempotencyKey(eventId, step, 0, call.name, contentDigest(call.arguments));
  const order = (id = 'call_0', args: unknown = { item: 'widget', qty: 2 }): ToolCall => ({
    id,
    name: 'create_order',
    arguments: args,
  });
  const posts = () => tp.requests.filter((r) => r.endpoint === 'tool');
  /** An operator's action, as the admin API performs it. */
  const asAdmin = (s: ExecutionSeed, fn: (tx: TransactionSql) => Promise<unknown>) =>
    withTenantTx(deps.sql, { role: 'tenant_admin_writer', tenantId: s.tenantId }, fn);

  describe('refusals are recorded and never dispatched', () => {
    it('a tool outside the revision’s allowlist', async () => {
      const s = await seed();
      const out = await invoke(s, { id: 'call_0', name: 'drop_tables', arguments: {} });
      expect(out).toMatchObject({ status: 'refused', body: { error: 'tool_not_allowed: drop_tables' } });
      const again = await invoke(s, { id: 'call_0', name: 'drop_tables', arguments: {} });
      expect(again).toEqual(out);
      const [row, ...rest] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
      expect(rest).toHaveLength(0);
      expect(row).toMatchObject({ tool_name: 'drop_tables', status: 'refused', attempts: 0 });
      expect(tp.requests).toHaveLength(0);
      const audit = await auditOf(deps.sql, s.tenantId);
      expect(audit.map((a) => [a.action, a.decision, a.tool_name, a.error_type])).toEqual([
        ['tool.invocation', 'refused', 'drop_tables', 'tool_not_allowed'],
      ]);
    });

    it('arguments that fail the tool’s JSON Schema, and a name no tool could have', async () => {
      const s = await seed();
      const out = await invoke(s, order('call_0', { item: 5, qty: 0 }));
      expect(out.status).toBe('refused');
      const error = (out as { body: { error: string } }).body.error;
      expect(error).toMatch(/^invalid_arguments: /);
      expect(error).toContain('/item must be string');
      expect(error).toContain('/qty must be >= 1');
      const odd = await invoke(s, { id: 'call_1', name: 'not a valid name!', arguments: 'oops' });
      expect(odd.status).toBe('refused');
      const rows = await invocationsOf(deps.sql, s.tenantId, s.eventId);
      expect(rows.map((r) => [r.tool_name, r.status])).toEqual([
        ['create_order', 'refused'],
        ['not_a_valid_name_', 'refused'],
      ]);
      expect(tp.requests).toHaveLength(0);
      expect((await auditOf(deps.sql, s.tenantId)).map((a) => a.error_type)).toEqual([
        'invalid_arguments',
        'tool_not_allowed',
      ]);
    });
  });

  it('dispatches with a stable Idempotency-Key and records the accepted receipt', async () => {
    const s = await seed();
    const out = await invoke(s, order(), 3);
    const key = keyOf(s.eventId, 3);
    expect(out).toMatchObject({
      status: 'accepted',
      body: { key, tool: 'create_order', result: { item: 'widget', qty: 2 } },
    });
    expect(posts()).toHaveLength(1);
    expect(posts()[0]!.headers['idempotency-key']).toBe(key);
    expect(posts()[0]!.body).toEqual({ item: 'widget', qty: 2 });
    expect(tp.effectCount(key)).toBe(1);
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'accepted', attempts: 1, idempotency_key: key, fencing_token: 1 });
    expect(row!.resolved_at).not.toBeNull();
    expect(row!.provider_receipt).toEqual((out as { body: unknown }).body);

    // A retried attempt returns the recorded result without sending again.
    expect(await invoke(s, order(), 3)).toEqual(out);
    expect(posts()).toHaveLength(1);
    const audit = await auditOf(deps.sql, s.tenantId);
    expect(audit.map((a) => a.decision)).toEqual(['accepted']);
    expect(audit[0]!.latency_ms).not.toBeNull();
  });

  it('a 4xx is a rejection: recorded, not applied, given to the model', async () => {
    const s = await seed();
    tp.rejectTool('create_order', { status: 409, error: 'out of stock' });
    const out = await invoke(s, order());
    expect(out).toMatchObject({ status: 'rejected', body: { error: 'out of stock' } });
    expect(tp.effects.filter((e) => e.tool === 'create_order' && e.key === keyOf(s.eventId, 0))).toHaveLength(
      0,
    );
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'rejected', last_error: 'http_409' });
    expect((await auditOf(deps.sql, s.tenantId)).map((a) => [a.decision, a.error_type])).toEqual([
      ['rejected', 'http_409'],
    ]);
  });

  it('applied, then the connection drops: reconciled by receipt to accepted, applied exactly once', async () => {
    const s = await seed();
    tp.faults.push({ kind: 'apply_then_drop' });
    const out = await invoke(s, order());
    const key = keyOf(s.eventId, 0);
    expect(out).toMatchObject({ status: 'accepted', body: { key, receipt_id: expect.any(String) } });
    expect(tp.effectCount(key)).toBe(1);
    expect(tp.requests.map((r) => r.endpoint)).toEqual(['tool', 'receipt']);
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'accepted', attempts: 1 });
    expect((await auditOf(deps.sql, s.tenantId)).at(-1)!.details).toMatchObject({ reconciled: true });
  });

  it('5xx and no receipt: back to prepared, and the retry sends the SAME key once more', async () => {
    const s = await seed();
    const key = keyOf(s.eventId, 0);
    tp.faults.push({ kind: 'status', status: 503 });
    const err = await failureOf(invoke(s, order()));
    expect(err.type).toBe('ToolRetryable');
    expect(err.nonRetryable).toBeFalsy();
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'prepared', last_error: 'not_accepted' });
    expect(tp.effectCount(key)).toBe(0);

    // Temporal retries the activity.
    const out = await invoke(s, order());
    expect(out.status).toBe('accepted');
    expect(posts().map((r) => r.headers['idempotency-key'])).toEqual([key, key]);
    expect(tp.effectCount(key)).toBe(1);
    const [done] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(done).toMatchObject({ status: 'accepted', attempts: 2 });
  });

  it('a 429 was not applied: back to prepared, retried after the provider’s delay with the same key', async () => {
    const s = await seed();
    const key = keyOf(s.eventId, 0);
    tp.faults.push({ kind: 'rate_limit', retryAfterSeconds: 2 });
    const err = await failureOf(invoke(s, order()));
    expect(err).toMatchObject({ type: 'ToolRetryable', nextRetryDelay: 2000 });
    expect((await invocationsOf(deps.sql, s.tenantId, s.eventId))[0]).toMatchObject({
      status: 'prepared',
      last_error: 'http_429',
    });
    expect(await invoke(s, order())).toMatchObject({ status: 'accepted' });
    expect(posts().map((r) => r.headers['idempotency-key'])).toEqual([key, key]);
    expect(tp.effectCount(key)).toBe(1);
    expect(tp.requests.filter((r) => r.endpoint === 'receipt')).toHaveLength(0);
  });

  it('an unknown outcome without a receipt_url goes to manual, and is never sent again', async () => {
    const s = await seed();
    tp.faults.push({ kind: 'timeout', ms: 5000 });
    const call: ToolCall = { id: 'call_0', name: 'send_fax', arguments: { to: '+4712345678' } };
    const out = await invoke(s, call);
    expect(out).toMatchObject({ status: 'manual', invocationId: expect.stringMatching(/^inv_/) });
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'manual', last_error: 'unknown_outcome_no_receipt_url' });
    expect(await invoke(s, call)).toEqual(out);
    expect(posts()).toHaveLength(1);
    expect((await auditOf(deps.sql, s.tenantId)).map((a) => [a.decision, a.error_type])).toEqual([
      ['manual', 'unknown_outcome_no_receipt_url'],
    ]);

    // An operator resolves it (the admin API's job); resuming hands the resolution to the model.
    await asAdmin(
      s,
      (tx) => tx`
      update tool_invocation
      set status = 'accepted', resolved_at = now(),
          resolution = ${tx.json({ outcome: 'accepted', reason: 'confirmed by phone', provider_receipt: { fax_id: 'F-1' } })}
      where tenant_id = ${s.tenantId} and invocation_id = ${row!.invocation_id} and status = 'manual'`,
    );
    const resumed = await act.resumeTool({
      tenantId: s.tenantId,
      eventId: s.eventId,
      invocationId: row!.invocation_id,
    });
    expect(resumed).toEqual({
      status: 'accepted',
      invocationId: row!.invocation_id,
      body: { fax_id: 'F-1' },
    });
  });

  it('confirmed not accepted, but the tool has no provider idempotency: manual, not resent', async () => {
    const s = await seed();
    tp.faults.push({ kind: 'status', status: 502 });
    const out = await invoke(s, { id: 'call_0', name: 'notify', arguments: { msg: 'hi' } });
    expect(out.status).toBe('manual');
    expect(posts()).toHaveLength(1);
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'manual', last_error: 'not_accepted_without_provider_idempotency' });
  });

  it('a receipt that cannot be fetched keeps reconciling, then goes manual after the window', async () => {
    const s = await seed();
    tp.setFaultPlan((r) => (r.endpoint === 'receipt' ? { kind: 'status', status: 500 } : undefined));
    tp.faults.push({ kind: 'status', status: 500 });
    const err = await failureOf(invoke(s, order()));
    expect(err.type).toBe('ToolReconciling');
    const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(row).toMatchObject({ status: 'reconciling', last_error: 'receipt_http_500' });

    const err2 = await failureOf(invoke(s, order()));
    expect(err2.type).toBe('ToolReconciling');
    // Past reconcile_window_s (default 120 s) since the dispatch: an operator takes over.
    await deps.sql`update tool_invocation set dispatched_at = now() - interval '121 seconds'
                   where tenant_id = ${s.tenantId} and invocation_id = ${row!.invocation_id}`;
    const out = await invoke(s, order());
    expect(out.status).toBe('manual');
    const [done] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
    expect(done).toMatchObject({ status: 'manual', last_error: 'reconcile_window_exceeded' });
    expect(posts()).toHaveLength(1);
    expect(tp.requests.filter((r) => r.endpoint === 'receipt')).toHaveLength(3);
  });

  it('a side-effect-free tool is simply sent again after an unknown outcome', async () => {
    const s = await seed();
    tp.faults.push({ kind: 'status', status: 500 });
    const call: ToolCall = { id: 'call_0', name: 'lookup', arguments: { order: '7' } };
    expect((await failureOf(invoke(s, call))).type).toBe('ToolRetryable');
    expect(await invoke(s, call)).toMatchObject({ status: 'accepted' });
    expect(posts()).toHaveLength(2);
    expect(tp.requests.filter((r) => r.endpoint === 'receipt')).toHaveLength(0);
  });

  describe('approval', () => {
    const refund: ToolCall = { id: 'call_0', name: 'refund', arguments: { order: 'A-1' } };

    it('waits for an operator, then resumeTool dispatches the approved call', async () => {
      const s = await seed();
      const before = Date.now();
      const out = await invoke(s, refund);
      expect(out).toMatchObject({
        status: 'awaiting_approval',
        invocationId: expect.stringMatching(/^inv_/),
      });
      const deadline = Date.parse((out as { deadline: string }).deadline);
      expect(deadline).toBeGreaterThan(before + 55_000);
      expect(deadline).toBeLessThan(Date.now() + 65_000);
      expect(await invoke(s, refund)).toEqual(out);
      expect(tp.requests).toHaveLength(0);
      const id = (out as { invocationId: string }).invocationId;
      // Still waiting: resuming changes nothing.
      expect(await act.resumeTool({ tenantId: s.tenantId, eventId: s.eventId, invocationId: id })).toEqual(
        out,
      );

      await asAdmin(
        s,
        (tx) => tx`
        update tool_invocation set status = 'prepared'
        where tenant_id = ${s.tenantId} and invocation_id = ${id} and status = 'awaiting_approval'`,
      );
      const resumed = await act.resumeTool({ tenantId: s.tenantId, eventId: s.eventId, invocationId: id });
      expect(resumed).toMatchObject({ status: 'accepted', invocationId: id, body: { tool: 'refund' } });
      expect(tp.effectCount(keyOf(s.eventId, 0, refund))).toBe(1);
      expect((await auditOf(deps.sql, s.tenantId)).map((a) => a.decision)).toEqual([
        'awaiting_approval',
        'accepted',
      ]);
    });

    it('expires to failed (approval_timeout) when nobody approves in time', async () => {
      const s = await seed();
      const out = await invoke(s, refund);
      const id = (out as { invocationId: string }).invocationId;
      expect(await act.expireApproval({ tenantId: s.tenantId, invocationId: id })).toEqual({
        expired: true,
        status: 'failed',
        body: { error: 'approval_timeout' },
      });
      const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
      expect(row).toMatchObject({ status: 'failed', last_error: 'approval_timeout' });
      expect(await act.resumeTool({ tenantId: s.tenantId, eventId: s.eventId, invocationId: id })).toEqual({
        status: 'failed',
        invocationId: id,
        body: { error: 'approval_timeout' },
      });
      expect(await act.expireApproval({ tenantId: s.tenantId, invocationId: id })).toEqual({
        expired: false,
        status: 'failed',
      });
      expect(tp.requests).toHaveLength(0);
      expect((await auditOf(deps.sql, s.tenantId)).map((a) => [a.decision, a.error_type])).toEqual([
        ['awaiting_approval', null],
        ['failed', 'approval_timeout'],
      ]);
    });

    it('an approval that lands before the timer wins: expireApproval changes nothing', async () => {
      const s = await seed();
      const id = ((await invoke(s, refund)) as { invocationId: string }).invocationId;
      await asAdmin(
        s,
        (tx) => tx`update tool_invocation set status = 'prepared'
                                  where tenant_id = ${s.tenantId} and invocation_id = ${id}`,
      );
      expect(await act.expireApproval({ tenantId: s.tenantId, invocationId: id })).toEqual({
        expired: false,
        status: 'prepared',
      });
    });
  });

  describe('concurrency and fencing', () => {
    it('two attempts of the same call at once: exactly one dispatch', async () => {
      const s = await seed();
      tp.faults.push({ kind: 'delay', ms: 400 });
      const results = await Promise.allSettled([invoke(s, order()), invoke(s, order())]);
      const key = keyOf(s.eventId, 0);
      expect(posts()).toHaveLength(1);
      expect(tp.effectCount(key)).toBe(1);
      const fulfilled = results.filter((r) => r.status === 'fulfilled');
      expect(fulfilled.length).toBeGreaterThanOrEqual(1);
      for (const r of fulfilled) expect(r.value.status).toBe('accepted');
      for (const r of results.filter((x) => x.status === 'rejected')) {
        expect(r.reason).toBeInstanceOf(ApplicationFailure);
        expect((r.reason as ApplicationFailure).type).toBe('ToolBusy');
        expect((r.reason as ApplicationFailure).nonRetryable).toBeFalsy();
      }
      // The busy one, retried, gets the recorded result.
      expect(await invoke(s, order())).toMatchObject({ status: 'accepted' });
      expect(posts()).toHaveLength(1);
      expect(await invocationsOf(deps.sql, s.tenantId, s.eventId)).toHaveLength(1);
    });

    it('an attempt whose claim was superseded writes nothing (FencedOut)', async () => {
      const s = await seed();
      tp.faults.push({ kind: 'delay', ms: 500 });
      const zombie = invoke(s, order());
      await waitFor(() => posts().length === 1, { timeoutMs: 5000 });
      // A newer attempt took the claim over (its lease had expired, say).
      await deps.sql`update tool_invocation set fencing_token = fencing_token + 1, status = 'reconciling'
                     where tenant_id = ${s.tenantId} and event_id = ${s.eventId}`;
      const err = await failureOf(zombie);
      expect(err.type).toBe('FencedOut');
      expect(err.nonRetryable).toBe(true);
      const [row] = await invocationsOf(deps.sql, s.tenantId, s.eventId);
      expect(row).toMatchObject({ status: 'reconciling', provider_receipt: null });
      expect(await auditOf(deps.sql, s.tenantId)).toHaveLength(0);
    });

    it('a crashed dispatcher’s expired lease is taken over by reconciling, not by resending', async () => {
      const s = await seed();
      const key = keyOf(s.eventId, 0);
      tp.faults.push({ kind: 'apply_then_drop' });
      tp.setFaultPlan((r) => (r.endpoint === 'receipt' ? { kind: 'timeout', ms: 3000 } : undefined));
      // The first attempt's receipt fetch times out: it stays reconciling with its lease released.
      expect((await failureOf(invoke(s, order()))).type).toBe('ToolReconciling');
      // Simulate a dispatcher that died holding the claim.
      await deps.sql`update tool_invocation set status = 'dispatching', lease_expires_at = now() - interval '1 second'
                     where tenant_id = ${s.tenantId} and event_id = ${s.eventId}`;
      tp.clearFaults();
      expect(await invoke(s, order())).toMatchObject({ status: 'accepted', body: { key } });
      expect(posts()).toHaveLength(1);
      expect(tp.effectCount(key)).toBe(1);
    });

    it('the key is the call (step, position, tool, arguments), not the model’s call id', async () => {
      const s = await seed();
      // A model asked again (after a reset) names the same call differently: the same invocation.
      const first = await invoke(s, order('call_0'));
      const again = await invoke(s, order('call_9f3c'));
      expect(again).toEqual(first);
      expect(posts()).toHaveLength(1);
      // Different arguments, or another position in the turn, are another call.
      await invoke(s, order('call_0', { item: 'gadget', qty: 1 }));
      await act.invokeTool({
        tenantId: s.tenantId,
        eventId: s.eventId,
        plan: s.plan,
        call: order(),
        step: 0,
        ordinal: 1,
      });
      const rows = await invocationsOf(deps.sql, s.tenantId, s.eventId);
      expect(new Set(rows.map((r) => r.idempotency_key)).size).toBe(3);
      expect(posts()).toHaveLength(3);
    });

    it('the first call of a step records the step’s other calls (prepared, nothing sent) for a resumed run', async () => {
      const s = await seed();
      const second = order('call_1', { item: 'gadget', qty: 1 });
      const calls = [order('call_0'), second];
      const first = await act.invokeTool({
        tenantId: s.tenantId,
        eventId: s.eventId,
        plan: s.plan,
        call: calls[0]!,
        step: 0,
        ordinal: 0,
        stepCalls: calls,
      });
      expect(first).toMatchObject({ status: 'accepted' });
      const rows = await invocationsOf(deps.sql, s.tenantId, s.eventId);
      expect(rows.map((r) => r.status).sort()).toEqual(['accepted', 'prepared']);
      expect(posts()).toHaveLength(1);
      // The second call, made later (or by a resumed run), is the recorded one: dispatched once.
      const out = await act.invokeTool({
        tenantId: s.tenantId,
        eventId: s.eventId,
        plan: s.plan,
        call: second,
        step: 0,
        ordinal: 1,
      });
      expect(out).toMatchObject({ status: 'accepted' });
      expect(await invocationsOf(deps.sql, s.tenantId, s.eventId)).toHaveLength(2);
      expect(posts()).toHaveLength(2);
    });

    it('no tool call is prepared for a message that is no longer running', async () => {
      const s = await seed();
      await deps.sql`update message_event set status = 'failed' where tenant_id = ${s.tenantId} and event_id = ${s.eventId}`;
      const err = await failureOf(invoke(s, order()));
      expect(err.type).toBe('FencedOut');
      expect(await invocationsOf(deps.sql, s.tenantId, s.eventId)).toHaveLength(0);
      expect(tp.requests).toHaveLength(0);
    });
  });
});
