import { ApplicationFailure } from '@temporalio/activity';
import { findTool, parseRevisionTools, toolCapabilityDigest } from '../agents/tools';
import { eventContext, extendExecutionLease } from '../db/queries/execution';
import { permitRelease } from '../db/queries/repair';
import {
  expireAwaitingApproval,
  invocationById,
  loadPinnedRevision,
  type ToolInvocationStatus,
} from '../db/queries/tools';
import type { ExecutionPlan } from '../workflows/shared';
import { appendRuntimeAudit, runtimeAuditContext } from './audit-runtime';
import type { ActivityDeps } from './deps';
import { FENCED_OUT } from './failures';
import { attemptOwner, isCurrentRun } from './owner';
import { drive } from './tool-calls/drive';
import type { InvokeToolInput, ToolOutcome } from './tool-calls/outcome';
import { recordCall } from './tool-calls/record';
import { toolSteps } from './tool-calls/steps';

// The tool activities of a message's execution. Their state machine (seeds: tool_invocation) is in
// tool-calls/: recording a call under its key (record.ts), moving it forward (drive.ts), sending it
// (dispatch.ts) and establishing an unknown outcome (reconcile.ts), over the shared fenced
// transition (steps.ts).

export function toolActivities(deps: ActivityDeps) {
  const s = toolSteps(deps);
  const { tx, leaseSeconds } = s;

  /**
   * Keeps the execution's concurrency permit (its lease) alive while a tool call runs or waits for
   * an operator: otherwise a long approval or manual wait would free the permit of a live execution.
   */
  const holdPermit = async (tenantId: string, eventId: string, seconds: number) => {
    await tx(tenantId, (t) => extendExecutionLease(t, { tenantId, eventId, seconds }));
  };
  /**
   * An execution that parks on an operator (approval, manual resolution) keeps its lease alive (the
   * sweeper sees it as live) but gives its tenant concurrency permit back, so N parked calls never
   * stop the tenant; it takes one again, in arrival order, when it resumes (permitAcquire). The
   * waiters to wake travel with the outcome.
   */
  const holdWhileWaiting = async (tenantId: string, eventId: string, outcome: ToolOutcome) => {
    if (outcome.status !== 'awaiting_approval' && outcome.status !== 'manual') return outcome;
    const seconds =
      outcome.status === 'awaiting_approval'
        ? Math.max(0, (Date.parse(outcome.deadline) - Date.now()) / 1000) + 120
        : // The workflow re-checks a manual invocation every 10 minutes (resumeTool extends again).
          15 * 60;
    const wake = await tx(tenantId, async (t) => {
      await extendExecutionLease(t, { tenantId, eventId, seconds });
      return permitRelease(t, tenantId, eventId);
    });
    return wake.length > 0 ? { ...outcome, wake } : outcome;
  };

  async function runFor(tenantId: string, eventId: string, plan: ExecutionPlan) {
    const ctx = await tx(tenantId, async (t) => ({
      event: await eventContext(t, tenantId, eventId),
      revision: await loadPinnedRevision(t, tenantId, plan),
    }));
    if (!ctx.event) throw ApplicationFailure.nonRetryable(`message ${eventId} not found`, 'NotFound');
    if (!isCurrentRun(ctx.event.workflow_id)) {
      throw ApplicationFailure.nonRetryable(
        `message ${eventId} is worked by ${ctx.event.workflow_id}`,
        FENCED_OUT,
      );
    }
    if (!ctx.revision || ctx.revision.content_digest !== plan.app.digest) {
      throw ApplicationFailure.nonRetryable('the pinned revision is missing or changed', 'PlanDrift');
    }
    const audit = runtimeAuditContext(tenantId, attemptOwner(deps.workerId), ctx.event, plan);
    return { tools: parseRevisionTools(ctx.revision.tools), audit, event: ctx.event };
  }

  return {
    /**
     * Runs one tool call of the model: refuses it (recorded, never sent) when the revision does
     * not allow the tool or the arguments fail its schema; otherwise records it `prepared` (or
     * `awaiting_approval`) under a stable idempotency key before anything is sent, then
     * dispatches, reconciles or waits, per the seeds' tool_invocation state machine. Retried
     * attempts continue from the recorded state and always reuse the same key.
     */
    async invokeTool(input: InvokeToolInput): Promise<ToolOutcome> {
      const { tenantId, eventId, plan } = input;
      await holdPermit(tenantId, eventId, leaseSeconds + 60);
      const owner = attemptOwner(deps.workerId);
      const { tools, audit } = await runFor(tenantId, eventId, plan);
      const { run, row } = await recordCall(s, input, tools, audit, owner);
      // Then the step's later calls (prepared, nothing sent): a run resumed in the middle of the
      // step finds every call the model asked for. Not one that needs an approval: its clock would
      // start before anyone could see it (it is recorded when the run reaches it).
      for (const [ordinal, call] of (input.stepCalls ?? []).entries()) {
        if (ordinal === 0 || findTool(tools, call.name)?.requires_approval) continue;
        await recordCall(s, { ...input, call, ordinal, stepCalls: undefined }, tools, audit, owner);
      }
      return holdWhileWaiting(tenantId, eventId, await drive(s, run, row));
    },

    /**
     * Continues an invocation after the workflow was signalled: returns an operator's resolution
     * (accepted/rejected), dispatches an approved call (the operator moved awaiting_approval →
     * prepared), or reports that it still waits.
     */
    async resumeTool(input: {
      tenantId: string;
      eventId: string;
      invocationId: string;
      /** the execution's plan; defaults to the one pinned on the message */
      plan?: ExecutionPlan;
    }): Promise<ToolOutcome> {
      const { tenantId, eventId, invocationId } = input;
      const found = await tx(tenantId, async (t) => ({
        row: await invocationById(t, tenantId, invocationId),
        event: await eventContext(t, tenantId, eventId),
      }));
      if (!found.row || found.row.event_id !== eventId || !found.event) {
        throw ApplicationFailure.nonRetryable(`tool invocation ${invocationId} not found`, 'NotFound');
      }
      const plan = input.plan ?? found.event.execution_plan;
      if (!plan) throw ApplicationFailure.nonRetryable('the message has no execution plan', 'PlanDrift');
      const { tools, audit } = await runFor(tenantId, eventId, plan);
      const tool = findTool(tools, found.row.tool_name);
      if (tool && toolCapabilityDigest(tool) !== found.row.tool_capability_digest) {
        throw ApplicationFailure.nonRetryable(`tool ${tool.name} changed since it was prepared`, 'PlanDrift');
      }
      await holdPermit(tenantId, eventId, leaseSeconds + 60);
      return holdWhileWaiting(
        tenantId,
        eventId,
        await drive(s, { tenantId, owner: attemptOwner(deps.workerId), tool, audit }, found.row),
      );
    },

    /**
     * The workflow's approval timer fired: awaiting_approval → failed ('approval_timeout'). When
     * an operator decided first, nothing changes and the current status is returned (the
     * workflow then calls resumeTool).
     */
    async expireApproval(input: {
      tenantId: string;
      invocationId: string;
    }): Promise<{ expired: boolean; status: ToolInvocationStatus; body?: unknown }> {
      const { tenantId, invocationId } = input;
      const expired = await tx(tenantId, async (t) => {
        const row = await expireAwaitingApproval(t, tenantId, invocationId);
        if (!row) {
          const current = await invocationById(t, tenantId, invocationId);
          if (!current)
            throw ApplicationFailure.nonRetryable(`tool invocation ${invocationId} not found`, 'NotFound');
          return { expired: false, status: current.status };
        }
        const event = await eventContext(t, tenantId, row.event_id);
        const plan = event?.execution_plan;
        if (event && plan) {
          await appendRuntimeAudit(
            t,
            runtimeAuditContext(tenantId, attemptOwner(deps.workerId), event, plan),
            {
              action: 'tool.invocation',
              decision: 'failed',
              toolName: row.tool_name,
              errorType: 'approval_timeout',
              details: { invocation_id: invocationId },
            },
          );
        }
        return { expired: true, status: row.status, body: { error: 'approval_timeout' } };
      });
      if (expired.expired) s.countOutcome('failed');
      return expired;
    },
  };
}
