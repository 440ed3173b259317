import type { Duration } from '@temporalio/common';
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  patched,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ReplyCommitted, StartResult } from '../activities/execution';
import type { ModelTurnInput, ModelTurnResult } from '../activities/model';
import type { ToolOutcome } from '../activities/tool-calls/outcome';
import type { RecordedToolCall, ToolExchange } from '../agents/messages';
import { deliverSegments, finishDelivery, finishedWithoutWaiting, settledByFirstSend, wake } from './deliver';
import { bookkeeping, models, starts, tools } from './options';
import {
  BUDGET_EXHAUSTED_REPLY,
  interruptSignal,
  type MessageStatus,
  type MessageWorkflowInput,
  type MessageWorkflowResult,
  MODEL_FAILED_REPLY,
  SA_STATUS,
  toolDecisionSignal,
  wakeSignal,
} from './shared';

/** How often a wait for an operator's resolution re-reads the invocation without a signal. */
const MANUAL_RECHECK = '10 minutes';

/**
 * Long waits (the session lane, an operator, a permit) continue as new before the history grows
 * past this many events; the next run resumes from the database (execution_start, the recorded tool
 * calls), so nothing is lost.
 */
const HISTORY_BUDGET = 800;

/** Patches (workflow changes that running histories must replay around). */
const BOUNDED_WAITS = 'bounded-waits-v1';
const PERMIT_ON_RESUME = 'permit-on-resume-v1';
const FENCED_OUT_STOPS = 'fenced-out-stops-v1';
const WAKE_DRIVEN_WAITS = 'wake-driven-waits-v1';
/** The revision's double-texting policy: debounce waits, merged messages, interrupts (migration 0036). */
const CONVERSATION_POLICY = 'conversation-policy-v1';

/**
 * With wake-driven waits, a waiting message re-reads the database only when woken: by the message
 * or permit that frees it, or — a wake lost — by the repair sweeper, which wakes session heads that
 * stayed waiting (activities/sweeper.ts; bounded per pass, so the database's poll rate does not
 * grow with the backlog). This timer is the last resort when even the sweeper is stopped.
 */
const LOST_WAKE_FALLBACK: Duration = '1 hour';

/** What one run keeps while it waits: signals that arrived, and how to continue as new. */
interface RunState {
  input: MessageWorkflowInput;
  decided: Set<string>;
  woken: boolean;
  /** policy interrupt: a newer message of the session asked this turn to stop */
  interrupted: boolean;
}

/** Continues as new when a long wait has grown the history enough (only with the bounded-waits patch). */
async function boundHistory(run: RunState): Promise<void> {
  const info = workflowInfo();
  if (
    info.historyLength >= (run.input.waits?.historyBudget ?? HISTORY_BUDGET) ||
    info.continueAsNewSuggested
  ) {
    await continueAsNew<typeof messageWorkflow>(run.input);
  }
}

/**
 * One inbound message, end to end: wait for its turn (per-session FIFO, tenant concurrency), run
 * the agent (model turns ⇄ durable tool calls), commit the pinned reply with its outbox, deliver the
 * segments in order (the last one finishes the message with its receipt), and wake the session's
 * next message. A scripted reply is started, committed and its first segment sent by one local
 * activity, so a one-segment message's history is one workflow task, one marker and its final
 * status (7 events).
 */
export async function messageWorkflow(input: MessageWorkflowInput): Promise<MessageWorkflowResult> {
  const { tenantId, eventId, channel } = input;
  const setStatus = (status: MessageStatus) => upsertSearchAttributes([{ key: SA_STATUS, value: status }]);
  const run: RunState = { input, decided: new Set<string>(), woken: false, interrupted: false };
  setHandler(wakeSignal, () => {
    run.woken = true;
  });
  setHandler(interruptSignal, () => {
    run.interrupted = true;
  });
  setHandler(toolDecisionSignal, ({ invocationId }) => {
    run.decided.add(invocationId);
  });
  if (input.repair) log.info('repair run', { eventId, ...input.repair });

  // 1. Our turn: the database decides (earlier messages of the session finished, a permit is free,
  // the revision's double-texting policy); a wake asks it again (the sweeper re-sends a lost one).
  let start: StartResult = await starts.startExecution({ tenantId, eventId, channel });
  let reply: ReplyCommitted | undefined;
  let firstSend: Extract<StartResult, { kind: 'committed' }>['firstSend'];
  while (reply === undefined) {
    for (let waits = 0; start.kind === 'wait'; waits++) {
      if (patched(BOUNDED_WAITS)) await boundHistory(run);
      else if (waits >= 200 || workflowInfo().continueAsNewSuggested)
        await continueAsNew<typeof messageWorkflow>(input);
      // Policy interrupt: ask the session's running turn to stop and take this message in.
      if (start.interrupt?.length && patched(CONVERSATION_POLICY)) await askToStop(start.interrupt);
      // A wake that arrived while startExecution ran is kept: the condition then returns at once.
      await condition(() => run.woken, waitTimeout(run, waits, start));
      run.woken = false;
      start = await starts.startExecution({ tenantId, eventId, channel });
    }
    if (start.kind === 'finished') {
      setStatus(start.status);
      await wake(start.wake);
      return { status: start.status, outcome: start.outcome, replyId: null, segmentsSent: 0 };
    }
    // Merged into another message's turn (collect / interrupt): that turn answers it, and its end
    // ends this message too (in the database), so this run stops.
    if (start.kind === 'merged') {
      return { status: start.status, outcome: 'merged', replyId: null, segmentsSent: 0 };
    }

    // 2. Execute, unless startExecution already committed the reply (fallback, scripted answer, or a
    // reply committed before a worker died: the model never runs again). The search attribute moves
    // from `received` (set at start) to the final status; the plan is in the database (admin message
    // detail) and in the result.
    if (start.kind === 'committed') {
      reply = start.reply;
      firstSend = start.firstSend;
      break;
    }
    if (start.wake?.length && patched(CONVERSATION_POLICY)) await wake(start.wake);
    const committed = await bookkeeping.commitReply({
      tenantId,
      eventId,
      channel,
      ...(await runAgent(run, start)),
      wakeWaiters: start.permitLimited,
    });
    if (!('interrupted' in committed)) {
      reply = committed;
      break;
    }
    // Policy interrupt: newer messages joined the turn instead of its commit; it runs again with
    // them, resumed from what is durable (its recorded tool calls).
    patched(CONVERSATION_POLICY);
    await wake(committed.wake);
    start = await starts.startExecution({ tenantId, eventId, channel });
  }
  if (reply.wake.length > 0) await wake(reply.wake);

  // 3. Deliver in order; the last segment's receipt finishes the message (replied only when every
  // segment is sent). A failed delivery, or a reply with nothing to send, is finished after it
  // (finishDelivery, which also sets the final status and wakes the session's next message).
  // A one-segment reply sent and finished by startExecution's local activity (the scripted common
  // case) is settled without a promise (see wake): the same commands, less sandbox CPU.
  const delivery =
    settledByFirstSend(reply.segmentIds, firstSend) ??
    (await deliverSegments(tenantId, eventId, reply.segmentIds, firstSend));
  const done = finishedWithoutWaiting(delivery) ?? (await finishDelivery(tenantId, eventId, delivery));
  return {
    status: done.status,
    outcome: delivery.failure ? 'delivery_failed' : reply.outcome,
    replyId: reply.replyId,
    segmentsSent: delivery.sent,
  };
}

/**
 * Model turns ⇄ tool calls, bounded by the revision's max_steps. Scripted turns are local
 * activities (pure and fast); remote models are regular activities with their own retry policy.
 * A resumed run (a restart, a Temporal reset, a repair) first rebuilds its turn from the recorded
 * tool calls — an open one is continued by its key, a settled one's recorded result is what the
 * model sees — and asks the model only for the next step: an accepted tool is never dispatched again.
 */
async function runAgent(
  run: RunState,
  start: Extract<StartResult, { kind: 'execute' }>,
): Promise<{ text: string; outcome: string | null }> {
  const { plan, maxSteps, firstDecision } = start;
  const recorded: readonly RecordedToolCall[] = start.recorded ?? [];
  const { tenantId, eventId } = run.input;
  const remote = plan.modelProfile.provider !== 'scripted';
  const plain = remote ? models.modelTurn : bookkeeping.modelTurn;
  // Policy interrupt: a remote model call is cancelled when a newer message asks (askToStop).
  const interruptible = remote && start.policy === 'interrupt' && patched(CONVERSATION_POLICY);
  const turn = interruptible ? (args: ModelTurnInput) => interruptibleTurn(run, args) : plain;
  const exchanges: ToolExchange[] = [];
  try {
    for (const r of recorded) {
      const result =
        r.result ??
        (await settle(run, await tools.resumeTool({ tenantId, eventId, invocationId: r.invocationId })));
      exchanges.push({ call: r.call, result: { status: result.status, body: result.body } });
    }
    // A resumed run that found its call parked started without a permit; if the call was decided
    // meanwhile (nothing parked now), it takes one before it goes on (at once when it holds one).
    if (recorded.length > 0 && patched(PERMIT_ON_RESUME)) await reacquirePermit(run);
    const firstStep = recorded.length > 0 ? Math.max(...recorded.map((r) => r.step)) + 1 : 0;
    for (let step = firstStep; step < maxSteps; step++) {
      const decision =
        step === 0 && firstDecision ? firstDecision : await turn({ tenantId, eventId, plan, exchanges });
      // Interrupted: the same step again, now with the newer messages.
      if (decision === null) {
        step--;
        continue;
      }
      if (decision.kind === 'reply') return { text: decision.text, outcome: null };
      if (decision.kind === 'budget_exhausted')
        return { text: BUDGET_EXHAUSTED_REPLY, outcome: 'budget_exhausted' };
      for (const [ordinal, call] of decision.calls.entries()) {
        // The first call records the step's other calls too, so a run resumed in the middle of
        // the step (a repair, a continue-as-new) still makes every call the model asked for.
        const stepCalls = ordinal === 0 && decision.calls.length > 1 ? decision.calls : undefined;
        const result = await settle(
          run,
          await tools.invokeTool({ tenantId, eventId, plan, call, step, ordinal, stepCalls }),
        );
        exchanges.push({ call, result: { status: result.status, body: result.body } });
      }
    }
    log.warn('agent reached max steps without a reply', { eventId });
    return { text: MODEL_FAILED_REPLY, outcome: 'model_failed' };
  } catch (err) {
    // Regular activities fail as ActivityFailure; local ones (scripted turns) as the ApplicationFailure itself.
    if (!(err instanceof ActivityFailure) && !(err instanceof ApplicationFailure)) throw err;
    // Another run works the message now (a repair): this one stops, and commits no fallback.
    if (fencedOut(err) && patched(FENCED_OUT_STOPS)) throw err;
    log.warn('model turn failed', { eventId, cause: err.cause?.message });
    return { text: MODEL_FAILED_REPLY, outcome: 'model_failed' };
  }
}

/**
 * A remote model turn that a newer message of the session may stop (policy interrupt): on the
 * interrupt signal the database first decides whether the newer messages join this turn
 * (absorbMessages: not after a side-effecting tool call, not a media message); only if one did is
 * the call cancelled (its answer, should it still come, is dropped) — else it goes on, so a hint
 * that cannot be acted on never re-runs the turn. null: interrupted, ask the model again with the
 * joined messages. An interrupt that arrives between model calls is taken in before the next one.
 */
async function interruptibleTurn(run: RunState, args: ModelTurnInput): Promise<ModelTurnResult | null> {
  const { tenantId, eventId } = run.input;
  const absorb = async () => {
    run.interrupted = false;
    const absorbed = await bookkeeping.absorbMessages({ tenantId, eventId });
    await wake(absorbed.wake);
    return absorbed.merged > 0;
  };
  if (run.interrupted) await absorb();
  const call = new CancellationScope();
  const answer = call.run(() => models.modelTurn(args));
  for (;;) {
    const watch = new CancellationScope();
    const stop = watch
      .run(() => condition(() => run.interrupted))
      .then(
        () => null,
        () => undefined,
      );
    let first: ModelTurnResult | null | undefined;
    try {
      first = await Promise.race([answer, stop]);
    } finally {
      watch.cancel();
    }
    if (first !== null && first !== undefined) return first;
    // Merged: the answer (even one that came meanwhile) does not cover the joined messages. The
    // watch itself cancelled (the workflow is): stop the call too.
    if ((await absorb()) || first === undefined) break;
  }
  call.cancel();
  await answer.catch(() => undefined);
  return null;
}

/** Policy interrupt: asks the session's running turn to stop (best effort: its commit checks too). */
async function askToStop(workflowIds: readonly string[]): Promise<void> {
  await Promise.all(
    workflowIds.map((id) =>
      getExternalWorkflowHandle(id)
        .signal(interruptSignal)
        .catch(() => undefined),
    ),
  );
}

function fencedOut(err: ActivityFailure | ApplicationFailure): boolean {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure && failure.type === 'FencedOut';
}

type Settled = Extract<ToolOutcome, { status: 'accepted' | 'rejected' | 'refused' | 'failed' }>;

/**
 * A tool call's outcome once it is settled: waits for an operator's approval (until its deadline)
 * or resolution (signalled; re-checked now and then in case a signal is lost). While parked the
 * execution has given its tenant permit back (its waiters are woken); it takes one again, in
 * arrival order, before it continues.
 */
async function settle(run: RunState, first: ToolOutcome): Promise<Settled> {
  const { tenantId, eventId } = run.input;
  let result = first;
  let parked = false;
  while (result.status === 'manual' || result.status === 'awaiting_approval') {
    parked = true;
    const invocationId = result.invocationId;
    if (result.wake) await wake(result.wake);
    const bounded = patched(BOUNDED_WAITS);
    // An operator decided: by a signal, or (the signal lost) before the approval could expire.
    let decidedLate = false;
    if (result.status === 'awaiting_approval') {
      const timeoutMs = Math.max(0, Date.parse(result.deadline) - Date.now());
      if (!(await condition(() => run.decided.has(invocationId), timeoutMs))) {
        const expired = await tools.expireApproval({ tenantId, invocationId });
        if (expired.expired) {
          result = { status: 'failed', invocationId, body: { error: 'approval_timeout' } };
          break;
        }
        decidedLate = true;
      }
    } else {
      // resumeTool reports `manual` again while nobody has resolved it.
      await condition(
        () => run.decided.has(invocationId),
        run.input.waits?.manualRecheckMs ?? MANUAL_RECHECK,
      );
      if (bounded && !run.decided.has(invocationId)) await boundHistory(run);
    }
    // A decision continues the execution (an approved call is dispatched): take a permit first.
    // A re-check without one only re-reads the invocation.
    const decided = run.decided.delete(invocationId) || decidedLate;
    if (decided && patched(PERMIT_ON_RESUME)) await reacquirePermit(run);
    result = await tools.resumeTool({ tenantId, eventId, invocationId });
  }
  // Settled after parking (decided, expired, or decided with the signal lost): the execution goes
  // on, so it holds a permit again (at once when it took one above).
  if (parked && patched(PERMIT_ON_RESUME)) await reacquirePermit(run);
  return result;
}

/**
 * How long a wait for its turn lasts without a wake: the fallback with wake-driven waits; before
 * them, a back-off poll per waiting workflow (kept for histories that ran it).
 */
function waitTimeout(run: RunState, waits: number, start: Extract<StartResult, { kind: 'wait' }>): Duration {
  const reason = start.reason;
  // Debounce (collect / interrupt): ask again once the session has been quiet long enough.
  if (reason === 'debounce' && patched(CONVERSATION_POLICY)) return Math.max(1, start.retryAfterMs ?? 1000);
  if (patched(WAKE_DRIVEN_WAITS)) return run.input.waits?.lostWakeMs ?? LOST_WAKE_FALLBACK;
  const backoffMs = Math.min(30_000, 500 * 2 ** Math.min(waits, 6));
  return reason === 'tenant_concurrency' ? Math.min(backoffMs, 5_000) : backoffMs;
}

/** Waits, woken (or by the fallback timer), until the execution holds a tenant permit again. */
async function reacquirePermit(run: RunState): Promise<void> {
  const { tenantId, eventId } = run.input;
  for (let waits = 0; !(await bookkeeping.acquirePermit({ tenantId, eventId })).granted; waits++) {
    await condition(
      () => run.woken,
      patched(WAKE_DRIVEN_WAITS)
        ? (run.input.waits?.lostWakeMs ?? LOST_WAKE_FALLBACK)
        : Math.min(5_000, 500 * 2 ** Math.min(waits, 4)),
    );
    run.woken = false;
    await boundHistory(run);
  }
}
