import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ModelDecision, ToolExchange } from '../agents/messages';
import { deliverSegments, finishDelivery, wake } from './deliver';
import { bookkeeping, models, starts, tools } from './options';
import {
  BUDGET_EXHAUSTED_REPLY,
  type ExecutionPlan,
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
  let woken = false;
  setHandler(wakeSignal, () => {
    woken = true;
  });
  const decided = new Set<string>();
  setHandler(toolDecisionSignal, ({ invocationId }) => {
    decided.add(invocationId);
  });

  // 1. Our turn: the database decides (earlier messages of the session finished, a permit is free);
  // signals only shorten the wait, polling with back-off covers a lost one.
  woken = false;
  let start = await starts.startExecution({ tenantId, eventId, channel });
  for (let waits = 0; start.kind === 'wait'; waits++) {
    if (waits >= 200 || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof messageWorkflow>(input);
    const backoffMs = Math.min(30_000, 500 * 2 ** Math.min(waits, 6));
    // A wake that arrived while startExecution ran is kept: the condition then returns at once.
    await condition(
      () => woken,
      start.reason === 'tenant_concurrency' ? Math.min(backoffMs, 5_000) : backoffMs,
    );
    woken = false;
    start = await starts.startExecution({ tenantId, eventId, channel });
  }
  if (start.kind === 'finished') {
    setStatus(start.status);
    await wake(start.wake);
    return { status: start.status, outcome: start.outcome, replyId: null, segmentsSent: 0 };
  }

  // 2. Execute, unless startExecution already committed the reply (fallback, scripted answer, or a
  // reply committed before a worker died: the model never runs again). The search attribute moves
  // from `received` (set at start) to the final status; the plan is in the database (admin message
  // detail) and in the result.
  const reply =
    start.kind === 'committed'
      ? start.reply
      : await bookkeeping.commitReply({
          tenantId,
          eventId,
          channel,
          ...(await runAgent(tenantId, eventId, start.plan, start.maxSteps, decided, start.firstDecision)),
          wakeWaiters: start.permitLimited,
        });
  await wake(reply.wake);

  // 3. Deliver in order; the last segment's receipt finishes the message (replied only when every
  // segment is sent). A failed delivery, or a reply with nothing to send, is finished after it
  // (finishDelivery, which also sets the final status and wakes the session's next message).
  const delivery = await deliverSegments(
    tenantId,
    eventId,
    reply.segmentIds,
    start.kind === 'committed' ? start.firstSend : undefined,
  );
  const done = await finishDelivery(tenantId, eventId, delivery);
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
 */
async function runAgent(
  tenantId: string,
  eventId: string,
  plan: ExecutionPlan,
  maxSteps: number,
  decided: Set<string>,
  firstDecision: ModelDecision | null,
): Promise<{ text: string; outcome: string | null }> {
  const turn = plan.modelProfile.provider === 'scripted' ? bookkeeping.modelTurn : models.modelTurn;
  const exchanges: ToolExchange[] = [];
  try {
    for (let step = 0; step < maxSteps; step++) {
      const decision =
        step === 0 && firstDecision ? firstDecision : await turn({ tenantId, eventId, plan, exchanges });
      if (decision.kind === 'reply') return { text: decision.text, outcome: null };
      if (decision.kind === 'budget_exhausted')
        return { text: BUDGET_EXHAUSTED_REPLY, outcome: 'budget_exhausted' };
      for (const call of decision.calls) {
        let result = await tools.invokeTool({ tenantId, eventId, plan, call, step });
        while (result.status === 'manual' || result.status === 'awaiting_approval') {
          const invocationId = result.invocationId;
          if (result.status === 'awaiting_approval') {
            const timeoutMs = Math.max(0, Date.parse(result.deadline) - Date.now());
            if (!(await condition(() => decided.has(invocationId), timeoutMs))) {
              const expired = await tools.expireApproval({ tenantId, invocationId });
              if (expired.expired) {
                result = { status: 'failed', invocationId, body: { error: 'approval_timeout' } };
                break;
              }
            }
          } else {
            // The operator's resolution signals us; re-checking now and then covers a lost signal
            // (resumeTool reports `manual` again while nobody has resolved it).
            await condition(() => decided.has(invocationId), MANUAL_RECHECK);
          }
          decided.delete(invocationId);
          result = await tools.resumeTool({ tenantId, eventId, invocationId });
        }
        exchanges.push({ call, result: { status: result.status, body: result.body } });
      }
    }
    log.warn('agent reached max steps without a reply', { eventId });
    return { text: MODEL_FAILED_REPLY, outcome: 'model_failed' };
  } catch (err) {
    // Regular activities fail as ActivityFailure; local ones (scripted turns) as the ApplicationFailure itself.
    if (!(err instanceof ActivityFailure) && !(err instanceof ApplicationFailure)) throw err;
    log.warn('model turn failed', { eventId, cause: err.cause?.message });
    return { text: MODEL_FAILED_REPLY, outcome: 'model_failed' };
  }
}
