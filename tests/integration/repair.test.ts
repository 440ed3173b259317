import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApp } from '../../api/app';
import { ensureSweeperSchedule } from '../../runtime/sweeper-schedule';
import { type FakeOpenAI, startFakeOpenAI } from '../fakes/openai';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram';
import { type FakeToolProvider, startFakeToolProvider } from '../fakes/tool-provider';
import { type AdminTenant, api, ok, tenantPath } from '../helpers/admin';
import {
  auditOfTenant,
  createOpenAIProfile,
  finished,
  messagesOf,
  publishRevision,
  sendText,
  waitForMessage,
} from '../helpers/execution-flow';
import { createHarness, type Harness, TEST_ADMIN_TOKEN } from '../helpers/harness';
import { seedTelegramTenant } from '../helpers/seed';
import { sweepNow } from '../helpers/sweep';
import { waitFor } from '../helpers/wait';

// An operator terminates a message workflow in the Temporal Web UI (or it fails, times out, is
// cancelled) at each stage of its life: waiting in the session lane, in a model turn, with a
// side-effecting tool in flight, with its reply pending. The message must still reach an end — its
// reply delivered from what is durable, never with an effect applied twice — and the chat's next
// message must be answered. The repair sweeper (one pass at a time here; the last test runs the
// real Schedule) finds the message, moves it to execution_reconciling under a new fence and starts
// a repair run (repair-<n>-<key>).

describe('repair after abnormal workflow ends', () => {
  let h: Harness;
  let telegram: FakeTelegram;
  let tools: FakeToolProvider;
  let openai: FakeOpenAI;

  const book = () => ({
    name: 'book',
    description: 'Books a table (test tool)',
    parameters: { type: 'object', properties: { ref: { type: 'string' } }, required: ['ref'] },
    endpoint_url: `${tools.url}/tools/book`,
    side_effect: true,
    idempotency: 'provider_key',
    receipt_url: `${tools.url}/receipts/{key}`,
  });
  const scripted = {
    rules: [
      {
        match: '^book (\\S+)$',
        tool_call: { name: 'book', arguments: { ref: '{{1}}' } },
        reply: 'Booked {{1}}',
      },
    ],
    default_reply: 'You said: {{text}}',
  };
  const seed = async () => {
    const t = await seedTelegramTenant(h.sql, h.secrets, {
      apiBaseUrl: telegram.url,
      tools: [book()],
      scripted,
    });
    telegram.addBot(t.botToken);
    return t;
  };
  const texts = (chatId: number) => telegram.sentTo(chatId).map((m) => m.text);
  const terminate = (workflowId: string) =>
    h.temporal.workflow.getHandle(workflowId).terminate('test: operator terminated it in the Web UI');
  /** Sweeps (every head is stale at once) until the message with this text has finished. */
  const repairUntilFinished = async (tenantId: string, text: string, timeoutMs = 60_000) => {
    await waitFor(
      async () => {
        await sweepNow(h, [tenantId], { staleSeconds: 0 });
        const m = (await messagesOf(h.sql, tenantId)).find((x) => x.text === text);
        return m !== undefined && finished(m);
      },
      { timeoutMs, label: `"${text}" finished after repair` },
    );
    return (await messagesOf(h.sql, tenantId)).find((x) => x.text === text)!;
  };
  const rowOf = async (tenantId: string, eventId: string) => {
    const [r] = await h.sql<{ status: string; workflow_id: string; repair_count: number }[]>`
      select status, workflow_id, repair_count from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
    return r!;
  };

  beforeAll(async () => {
    h = await createHarness();
    telegram = await startFakeTelegram();
    tools = await startFakeToolProvider();
    openai = await startFakeOpenAI();
    await h.startWorker();
  });
  afterAll(async () => {
    await h?.close();
    await telegram?.close();
    await tools?.close();
    await openai?.close();
  });

  it('terminated while waiting in the session lane: repaired, answered in order, the next message too', async () => {
    const t = await seed();
    const chat = 71_001;
    let slow = true;
    tools.setFaultPlan((r) => {
      if (r.endpoint === 'tool' && slow) {
        slow = false;
        return { kind: 'delay', ms: 3000 };
      }
      return undefined;
    });
    await sendText(h, t, chat, 'book L-1');
    await sendText(h, t, chat, 'second');
    const waiting = await waitForMessage(h.sql, t.tenantId, 'second', () => true);
    await waitFor(
      async () => (await h.temporal.workflow.getHandle(waiting.workflow_id).describe()).historyLength > 3,
      { label: 'second waits in its lane' },
    );
    expect((await rowOf(t.tenantId, waiting.event_id)).status).toBe('received');
    await terminate(waiting.workflow_id);

    await waitForMessage(h.sql, t.tenantId, 'book L-1', (m) => m.status === 'replied');
    const repaired = await repairUntilFinished(t.tenantId, 'second');
    expect(repaired.status).toBe('replied');
    const row = await rowOf(t.tenantId, waiting.event_id);
    expect(row.repair_count).toBe(1);
    expect(row.workflow_id.startsWith('repair-1-')).toBe(true);

    await sendText(h, t, chat, 'third');
    await waitForMessage(h.sql, t.tenantId, 'third', (m) => m.status === 'replied');
    expect(texts(chat)).toEqual(['Booked L-1', 'You said: second', 'You said: third']);
    expect(tools.effects).toHaveLength(1);
    const repairs = (await auditOfTenant(h.sql, t.tenantId)).filter((a) => a.action === 'message.repair');
    expect(repairs.map((a) => [a.decision, a.reason])).toEqual([['repair_started', 'workflow_terminated']]);
  }, 90_000);

  it('a lost wake: the waiting message does not poll on its own; the sweeper wakes it', async () => {
    const t = await seed();
    const chat = 71_019;
    // The first message is recorded while Temporal is unreachable, so it never runs and the second
    // waits behind it in the session lane.
    const down = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500 }) });
    await sendText({ ...h, app: newApp({ ...h.appDeps, temporal: down }) }, t, chat, 'first');
    await down.connection.close().catch(() => undefined);
    await sendText(h, t, chat, 'second');
    const second = await waitForMessage(h.sql, t.tenantId, 'second', () => true);
    const handle = h.temporal.workflow.getHandle(second.workflow_id);
    await waitFor(async () => (await handle.describe()).historyLength > 3, {
      label: 'second waits in its lane',
    });

    // The first ends with nobody told (as when its finisher dies before it signals the next).
    await h.sql`update message_event set status = 'failed', outcome = 'test_lost_wake', updated_at = now()
                where tenant_id = ${t.tenantId} and status = 'received' and event_id <> ${second.event_id}`;
    const quiet = (await handle.describe()).historyLength;
    // The back-off of old polled at 0.5, 1, 2 and 4 s; a wake-driven wait asks nothing.
    await new Promise((r) => setTimeout(r, 4_000));
    expect((await handle.describe()).historyLength).toBe(quiet);
    expect((await rowOf(t.tenantId, second.event_id)).status).toBe('received');

    const report = await sweepNow(h, [t.tenantId], { staleSeconds: 0 });
    expect(report.woken).toBe(1);
    await waitForMessage(h.sql, t.tenantId, 'second', (m) => m.status === 'replied');
    expect(texts(chat)).toEqual(['You said: second']);
  }, 60_000);

  it('terminated during a model turn: the repair runs the turn again and replies once', async () => {
    const t = await seed();
    const admin = { ...t, adminKey: TEST_ADMIN_TOKEN, modelProfileId: '' } as unknown as AdminTenant;
    const profile = await createOpenAIProfile(h.app, admin, {
      baseUrl: openai.baseURL,
      apiKey: openai.apiKey,
    });
    await publishRevision(h.app, { ...admin, modelProfileId: profile.model_profile_id }, {});
    const chat = 71_002;
    let calls = 0;
    openai.setFaultPlan((r) =>
      r.path?.includes('chat/completions') && calls++ === 0 ? { kind: 'delay', ms: 6000 } : undefined,
    );
    await sendText(h, t, chat, 'think hard');
    await waitFor(() => openai.requests.length >= 1, { label: 'the model call is in flight' });
    const m = await waitForMessage(h.sql, t.tenantId, 'think hard', (x) => x.status === 'running');
    await terminate(m.workflow_id);

    const repaired = await repairUntilFinished(t.tenantId, 'think hard');
    expect(repaired.status).toBe('replied');
    expect(texts(chat)).toEqual(['echo: think hard']);
    await sendText(h, t, chat, 'and now?');
    await waitForMessage(h.sql, t.tenantId, 'and now?', (x) => x.status === 'replied');
    expect(texts(chat)).toEqual(['echo: think hard', 'echo: and now?']);
    // The terminated run's call answers late (after the repair's turn claimed a newer fence): its
    // answer is dropped, but the tokens it spent are counted — unless its activity, heartbeating,
    // learnt first that its run is gone and aborted the call (nothing answered, nothing billed).
    const late = openai.requests.find(
      (r) => r.path?.includes('chat/completions') && JSON.stringify(r.body ?? {}).includes('think hard'),
    )!;
    await waitFor(() => late.status !== undefined || late.aborted === true, {
      label: 'the late call answered (or was aborted)',
      timeoutMs: 15_000,
    });
    const usageOfTurn = () =>
      h.sql`select 1 from usage_event where tenant_id = ${t.tenantId} and event_id = ${m.event_id}`;
    await waitFor(async () => (await usageOfTurn()).length === (late.aborted ? 1 : 2), {
      label: 'every answered call billed',
      timeoutMs: 10_000,
    });
    await new Promise((r) => setTimeout(r, 500));
    expect(await usageOfTurn()).toHaveLength(late.aborted ? 1 : 2);
  }, 90_000);

  it('terminated with a side-effecting tool in flight: reconciled by its key, applied once, replied once', async () => {
    const t = await seed();
    const chat = 71_003;
    let first = true;
    // The dropped answer makes the dispatch unknown; the terminated run's receipt lookup then hangs
    // and fails, so only the repair run can establish the outcome (by the key's receipt).
    let firstReceipt = true;
    tools.setFaultPlan((r) => {
      if (r.endpoint === 'tool' && first) {
        first = false;
        return { kind: 'apply_then_drop' };
      }
      if (r.endpoint === 'receipt' && firstReceipt) {
        firstReceipt = false;
        return { kind: 'timeout', ms: 1500 };
      }
      return undefined;
    });
    await sendText(h, t, chat, 'book T-1');
    await waitFor(() => !firstReceipt, { label: 'the receipt lookup is in flight' });
    const m = await waitForMessage(h.sql, t.tenantId, 'book T-1', (x) => x.status === 'running');
    await terminate(m.workflow_id);

    const repaired = await repairUntilFinished(t.tenantId, 'book T-1');
    expect(repaired.status).toBe('replied');
    expect(texts(chat)).toEqual(['Booked T-1']);
    const inv = await h.sql<{ status: string; idempotency_key: string }[]>`
      select status, idempotency_key from tool_invocation where tenant_id = ${t.tenantId} and event_id = ${m.event_id}`;
    expect(inv).toHaveLength(1);
    expect(inv[0]!.status).toBe('accepted');
    expect(tools.effectCount(inv[0]!.idempotency_key)).toBe(1);
    expect(
      tools.requests.filter((r) => r.endpoint === 'tool' && r.key === inv[0]!.idempotency_key),
    ).toHaveLength(1);
    // Established by the repair run's reconciliation (a second receipt lookup), not by the dead run.
    expect(tools.requests.filter((r) => r.endpoint === 'receipt').length).toBeGreaterThanOrEqual(2);
    const accepted = (await auditOfTenant(h.sql, t.tenantId)).find(
      (a) => a.action === 'tool.invocation' && a.decision === 'accepted',
    );
    expect(accepted?.details).toMatchObject({ reconciled: true });
    tools.setFaultPlan(undefined);
    await sendText(h, t, chat, 'thanks');
    await waitForMessage(h.sql, t.tenantId, 'thanks', (x) => x.status === 'replied');
  }, 120_000);

  it('terminated with its reply pending: delivery resumes from the pinned reply, the model never runs again', async () => {
    const t = await seed();
    const chat = 71_004;
    telegram.setFaultPlan((r) =>
      String(r.chatId) === String(chat) ? { kind: 'status', status: 500 } : undefined,
    );
    await sendText(h, t, chat, 'pending reply');
    const m = await waitForMessage(h.sql, t.tenantId, 'pending reply', (x) => x.status === 'reply_pending');
    await waitFor(
      async () =>
        (
          await h.sql`select 1 from reply_outbox where tenant_id = ${t.tenantId} and event_id = ${m.event_id}
                      and status = 'retryable' and attempts >= 2`
        ).length === 1,
      { label: 'the segment is being retried' },
    );
    await terminate(m.workflow_id);
    telegram.setFaultPlan(undefined);

    const repaired = await repairUntilFinished(t.tenantId, 'pending reply');
    expect(repaired.status).toBe('replied');
    expect(texts(chat)).toEqual(['You said: pending reply']);
    // One committed reply: memory and outbox written once, by the first run.
    const counts = await h.sql<{ memory: number; segments: number }[]>`
      select (select count(*)::int from memory_entry where tenant_id = ${t.tenantId} and source_event_id = ${m.event_id}) as memory,
             (select count(*)::int from reply_outbox where tenant_id = ${t.tenantId} and event_id = ${m.event_id}) as segments`;
    expect(counts[0]).toEqual({ memory: 2, segments: 1 });
    await sendText(h, t, chat, 'next one');
    await waitForMessage(h.sql, t.tenantId, 'next one', (x) => x.status === 'replied');
    expect(texts(chat)).toEqual(['You said: pending reply', 'You said: next one']);
  }, 90_000);

  it('history gone (workflow_missing): repaired; a run reset after the repair stops at its first step', async () => {
    const t = await seed();
    const chat = 71_008;
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: 1500 } : undefined));
    await sendText(h, t, chat, 'book M-1');
    const m = await waitForMessage(h.sql, t.tenantId, 'book M-1', (x) => x.status === 'running');
    await terminate(m.workflow_id);
    tools.setFaultPlan(undefined);
    // The namespace lost it (retention, a deleted history): Temporal no longer knows the workflow.
    const { runId } = await h.temporal.workflow.getHandle(m.workflow_id).describe();
    await h.temporal.workflowService.deleteWorkflowExecution({
      namespace: 'default',
      workflowExecution: { workflowId: m.workflow_id, runId },
    });
    // Deletion is asynchronous (seconds, more under load): the sweeper repairs once Temporal no
    // longer knows the workflow.
    const repaired = await repairUntilFinished(t.tenantId, 'book M-1', 120_000);
    expect(repaired.status).toBe('replied');
    const repairs = (await auditOfTenant(h.sql, t.tenantId)).filter((a) => a.action === 'message.repair');
    // Deletion is asynchronous: a pass that still saw the closed run repairs it as terminated.
    expect(repairs).toHaveLength(1);
    expect(['workflow_missing', 'workflow_terminated']).toContain(repairs[0]!.reason);
    expect(texts(chat)).toEqual(['Booked M-1']);
    expect(tools.effects.filter((e) => e.args.ref === 'M-1')).toHaveLength(1);
  }, 180_000);

  it('a run reset in the Web UI after its message was repaired stops: never a second run on one message', async () => {
    const t = await seed();
    const chat = 71_009;
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: 1500 } : undefined));
    await sendText(h, t, chat, 'book R-9');
    // The tool call is in flight, so the first workflow task has completed (a reset point exists).
    await waitFor(() => tools.requests.some((r) => r.endpoint === 'tool' && r.body?.ref === 'R-9'), {
      label: 'the tool call is in flight',
    });
    const m = await waitForMessage(h.sql, t.tenantId, 'book R-9', (x) => x.status === 'running');
    await terminate(m.workflow_id);
    tools.setFaultPlan(undefined);
    await repairUntilFinished(t.tenantId, 'book R-9');
    const handle = h.temporal.workflow.getHandle(m.workflow_id);
    const history = await handle.fetchHistory();
    const firstTask = history.events!.find((e) => e.workflowTaskCompletedEventAttributes)!;
    const { runId } = await handle.describe();
    const reset = await h.temporal.workflowService.resetWorkflowExecution({
      namespace: 'default',
      workflowExecution: { workflowId: m.workflow_id, runId },
      workflowTaskFinishEventId: firstTask.eventId,
      requestId: crypto.randomUUID(),
      reason: 'test: an operator resets the old run',
    });
    const revived = h.temporal.workflow.getHandle(m.workflow_id, reset.runId ?? undefined);
    await expect(revived.result()).rejects.toThrow();
    const failure = (await revived.fetchHistory()).events!.find(
      (e) => e.workflowExecutionFailedEventAttributes,
    );
    expect(JSON.stringify(failure)).toMatch(/FencedOut/);
    expect(texts(chat)).toEqual(['Booked R-9']);
    expect((await rowOf(t.tenantId, m.event_id)).workflow_id.startsWith('repair-1-')).toBe(true);
  }, 90_000);

  it('past the repair limit: failed with a dead letter an operator can retry, and the chat moves on', async () => {
    const t = await seed();
    const chat = 71_005;
    let slow = true;
    tools.setFaultPlan((r) => {
      if (r.endpoint === 'tool' && slow) {
        slow = false;
        return { kind: 'delay', ms: 2000 };
      }
      return undefined;
    });
    await sendText(h, t, chat, 'book D-1');
    const m = await waitForMessage(h.sql, t.tenantId, 'book D-1', (x) => x.status === 'running');
    await terminate(m.workflow_id);
    await sendText(h, t, chat, 'after the dead letter');
    await waitFor(
      async () => {
        await sweepNow(h, [t.tenantId], { staleSeconds: 0, maxRepairs: 0 });
        return finished(await waitForMessage(h.sql, t.tenantId, 'book D-1', () => true));
      },
      { timeoutMs: 30_000, label: 'dead-lettered' },
    );
    const failed = await waitForMessage(h.sql, t.tenantId, 'book D-1', () => true);
    expect(failed).toMatchObject({ status: 'failed', outcome: 'workflow_terminated' });
    const [dl] = await h.sql<{ dead_letter_id: string; kind: string; reason_class: string }[]>`
      select dead_letter_id, kind, reason_class from dead_letter where tenant_id = ${t.tenantId} and event_id = ${m.event_id}`;
    expect(dl).toMatchObject({ kind: 'execution', reason_class: 'workflow_terminated' });
    // The session's next message was woken and answered.
    await waitForMessage(h.sql, t.tenantId, 'after the dead letter', (x) => x.status === 'replied');

    // The operator retries it: a repair run resumes it (the tool call reconciled by its key, not sent again).
    const res = await api(
      h.app,
      'POST',
      tenantPath(t.tenantId, `/dead-letters/${dl!.dead_letter_id}/retry`),
      {
        body: { reason: 'looked into it' },
      },
    );
    expect(res.status, res.text).toBe(202);
    expect(res.body.retry_workflow_id).toMatch(/^repair-1-/);
    await waitForMessage(h.sql, t.tenantId, 'book D-1', (x) => x.status === 'replied', 60_000);
    expect(texts(chat)).toEqual(['You said: after the dead letter', 'Booked D-1']);
    expect(tools.effects.filter((e) => e.args.ref === 'D-1')).toHaveLength(1);
  }, 120_000);

  it('operator actions: message detail shows the mismatch; fail and repair are scoped, audited, and refuse bad input', async () => {
    const t = await seed();
    const other = await seed();
    const otherKey = (
      await ok(
        api(h.app, 'POST', tenantPath(other.tenantId, '/api-keys'), { body: { role: 'tenant_admin' } }),
        201,
      )
    ).key as string;
    const chat = 71_006;
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: 1500 } : undefined));
    await sendText(h, t, chat, 'book O-1');
    const m = await waitForMessage(h.sql, t.tenantId, 'book O-1', (x) => x.status === 'running');
    await terminate(m.workflow_id);
    tools.setFaultPlan(undefined);
    const path = (rest: string) => tenantPath(t.tenantId, `/messages/${m.event_id}${rest}`);

    const detail = await ok(api(h.app, 'GET', path('')));
    expect(detail).toMatchObject({ status: 'running', workflow_status: 'terminated', repair_count: 0 });

    // Bad input changes nothing: no reason, another tenant's key, an unknown message.
    const noReason = await api(h.app, 'POST', path('/fail'), { body: {} });
    expect([noReason.status, noReason.body.error.code]).toEqual([400, 'validation_failed']);
    expect((await api(h.app, 'POST', path('/repair'), { token: otherKey, body: {} })).status).toBe(404);
    expect((await api(h.app, 'POST', path('/fail'), { token: otherKey, body: { reason: 'x' } })).status).toBe(
      404,
    );
    const unknown = tenantPath(t.tenantId, '/messages/evt_01J00000000000000000000000/repair');
    expect((await api(h.app, 'POST', unknown, { body: {} })).status).toBe(404);
    expect((await rowOf(t.tenantId, m.event_id)).status).toBe('running');

    const repair = await api(h.app, 'POST', path('/repair'), { body: { reason: 'stuck after a terminate' } });
    expect(repair.status, repair.text).toBe(202);
    expect(repair.body).toMatchObject({
      status: 'execution_reconciling',
      repair: 1,
      previous_workflow_status: 'terminated',
    });
    await waitForMessage(h.sql, t.tenantId, 'book O-1', (x) => x.status === 'replied', 60_000);
    const after = await ok(api(h.app, 'GET', path('')));
    expect(after).toMatchObject({ status: 'replied', repair_count: 1, workflow_id: repair.body.workflow_id });

    // A finished message: both refused, nothing changed.
    for (const action of ['/repair', '/fail']) {
      const res = await api(h.app, 'POST', path(action), { body: { reason: 'again' } });
      expect([res.status, res.body.error.code]).toEqual([409, 'invalid_transition']);
    }

    // fail: a message stuck behind a live workflow (a slow tool) is ended, and its chat moves on.
    tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: 10_000 } : undefined));
    await sendText(h, t, chat, 'book O-2');
    const stuck = await waitForMessage(h.sql, t.tenantId, 'book O-2', (x) => x.status === 'running');
    await sendText(h, t, chat, 'behind it');
    const failRes = await api(h.app, 'POST', tenantPath(t.tenantId, `/messages/${stuck.event_id}/fail`), {
      body: { reason: 'the provider is down for the day' },
    });
    expect(failRes.status, failRes.text).toBe(200);
    expect(failRes.body).toMatchObject({
      status: 'failed',
      outcome: 'operator_failed',
      previous_workflow_status: 'running',
    });
    expect((await h.temporal.workflow.getHandle(stuck.workflow_id).describe()).status.name).toBe(
      'TERMINATED',
    );
    await waitForMessage(h.sql, t.tenantId, 'behind it', (x) => x.status === 'replied');
    tools.setFaultPlan(undefined);
    const audit = (await auditOfTenant(h.sql, t.tenantId)).filter((a) => a.action.startsWith('message.'));
    expect(audit.filter((a) => a.action !== 'message.finished').map((a) => [a.action, a.decision])).toEqual([
      ['message.repair', 'repair_started'],
      ['message.fail', 'failed'],
    ]);
  }, 120_000);

  it('on the real Schedule: a chat whose head message’s workflow was terminated answers its next message within the bound', async () => {
    const t = await seed();
    const chat = 71_007;
    const scheduleId = `sweeper-test-${h.taskQueue}`;
    await ensureSweeperSchedule(h.temporal, {
      taskQueue: h.taskQueue,
      scheduleId,
      everySeconds: 10,
      passSeconds: 1,
      options: { tenantIds: [t.tenantId], staleSeconds: 5, unstartedSeconds: 1 },
    });
    try {
      const schedule = await h.temporal.schedule.getHandle(scheduleId).describe();
      expect(schedule.state.paused).toBe(false);
      tools.setFaultPlan((r) => (r.endpoint === 'tool' ? { kind: 'delay', ms: 1500 } : undefined));
      await sendText(h, t, chat, 'book S-1');
      const head = await waitForMessage(h.sql, t.tenantId, 'book S-1', (x) => x.status === 'running');
      await terminate(head.workflow_id);
      tools.setFaultPlan(undefined);
      const sentAt = Date.now();
      await sendText(h, t, chat, 'are you there?');
      // The bound (SWITCHYARD_REPAIR_AFTER_S + a pass) is 2 minutes by default; here 5 s + 1 s, plus
      // the Schedule's first action (every 10 s) and the repair run itself.
      await waitForMessage(h.sql, t.tenantId, 'are you there?', (x) => x.status === 'replied', 60_000);
      expect(Date.now() - sentAt).toBeLessThan(40_000);
      expect(texts(chat)).toEqual(['Booked S-1', 'You said: are you there?']);
      expect((await waitForMessage(h.sql, t.tenantId, 'book S-1', () => true)).status).toBe('replied');
    } finally {
      await h.temporal.schedule.getHandle(scheduleId).delete();
    }
  }, 150_000);
});
