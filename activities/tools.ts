import { ApplicationFailure } from '@temporalio/activity';
import type { TransactionSql } from 'postgres';
import type { RecordedToolCall, ToolCall } from '../agents/messages';
import {
  dispatchToolCall,
  fetchToolReceipt,
  findTool,
  parseRevisionTools,
  receiptRef,
  type ToolDefinition,
  toolCapabilityDigest,
  validateToolArguments,
} from '../agents/tools';
import { newId } from '../db/ids';
import { insertDeadLetter } from '../db/queries/dead-letters';
import { eventContext, extendExecutionLease } from '../db/queries/execution';
import { permitRelease } from '../db/queries/repair';
import {
  claimDispatch,
  claimReconcile,
  expireAwaitingApproval,
  type InvocationChange,
  insertInvocation,
  invocationById,
  invocationByKey,
  invocationsOfEvent,
  loadPinnedRevision,
  type ToolInvocationRow,
  type ToolInvocationStatus,
  transitionInvocation,
} from '../db/queries/tools';
import { withTenantTx } from '../db/tx';
import { contentDigest, sha256Hex } from '../lib/digest';
import type { ExecutionPlan } from '../workflows/shared';
import { appendRuntimeAudit, type RuntimeAuditContext, runtimeAuditContext } from './audit-runtime';
import { retryTransient } from './db-retry';
import type { ActivityDeps } from './deps';
import { FENCED_OUT } from './failures';
import { attemptOwner, isCurrentRun } from './owner';

/** What the workflow learns from one tool call. */
export type ToolOutcome =
  | { status: 'accepted' | 'rejected' | 'refused' | 'failed'; invocationId: string; body: unknown }
  /**
   * waits for an operator's approval until `deadline` (ISO 8601), then expireApproval. `wake`: the
   * tenant's permit waiters, woken because the parked execution gave its permit back.
   */
  | { status: 'awaiting_approval'; invocationId: string; deadline: string; wake?: string[] }
  /** the outcome could not be established: waits for an operator's resolution */
  | { status: 'manual'; invocationId: string; wake?: string[] };

export interface InvokeToolInput {
  tenantId: string;
  eventId: string;
  plan: ExecutionPlan;
  call: ToolCall;
  /** the model turn (0-based) this call belongs to */
  step: number;
  /** the call's position among the turn's calls (absent in histories from before 0019: 0) */
  ordinal?: number;
  /** with the step's first call: every call of the step, recorded before the first is sent */
  stepCalls?: ToolCall[];
}

/**
 * The Idempotency-Key of one tool call of one execution, the same on every attempt and in every
 * run of the message (a restart, a Temporal reset, a repair): derived from where the call stands in
 * the execution and what it asks — never from the model's call id, which a model re-run after a
 * reset changes, so the same call would be dispatched and applied a second time.
 */
export function toolIdempotencyKey(
  eventId: string,
  step: number,
  ordinal: number,
  toolName: string,
  argumentsDigest: string,
): string {
  return sha256Hex(`${eventId}/${step}/${ordinal}/${toolName}/${argumentsDigest}`);
}

/** The key of a call prepared before 0019 (from the model's call id): such a row is reused, never re-dispatched. */
function legacyIdempotencyKey(eventId: string, step: number, callId: string): string {
  return sha256Hex(`${eventId}/${step}/${callId}`);
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** The states switchyard_tool_invocations_total counts an invocation reaching. */
const REPORTED: readonly ToolInvocationStatus[] = ['accepted', 'rejected', 'refused', 'failed', 'manual'];
const MAX_TRANSITIONS = 6;

export function toolActivities(deps: ActivityDeps) {
  const tx = <T>(tenantId: string, fn: (tx: TransactionSql) => Promise<T>) =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, fn);
  const timeoutMs = deps.sendTimeoutMs;
  /** The invocation reached one of the states the metric reports (a settled one, or an operator's). */
  const countOutcome = (status: ToolInvocationStatus) => {
    if (REPORTED.includes(status)) deps.metrics?.toolInvocations.inc({ outcome: status });
  };
  // A claim outlives the longest HTTP call it makes; past it, the holder is presumed dead.
  const leaseSeconds = Math.ceil(timeoutMs / 1000) + 10;

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

  interface Run {
    tenantId: string;
    owner: string;
    tool: ToolDefinition | null;
    audit: RuntimeAuditContext;
  }

  /** A CAS that must succeed: a miss means a newer claim owns the row. */
  async function transition(
    run: Run,
    row: ToolInvocationRow,
    from: readonly ToolInvocationStatus[],
    change: InvocationChange,
    audit?: {
      decision: string;
      latencyMs?: number;
      errorType?: string | null;
      details?: Record<string, unknown>;
    },
  ): Promise<ToolInvocationRow> {
    const moved = await tx(run.tenantId, async (t) => {
      const next = await transitionInvocation(t, {
        tenantId: run.tenantId,
        invocationId: row.invocation_id,
        from,
        fencingToken: row.fencing_token,
        change,
      });
      if (!next) {
        throw ApplicationFailure.nonRetryable(
          `tool invocation ${row.invocation_id} was claimed by a newer attempt`,
          FENCED_OUT,
        );
      }
      if (change.to === 'manual') {
        // Visible to operators in the DLQ until the resolution route settles it.
        await insertDeadLetter(t, {
          tenantId: run.tenantId,
          deadLetterId: `dl_${row.invocation_id.slice(4)}`,
          eventId: row.event_id,
          kind: 'tool',
          invocationId: row.invocation_id,
          reasonClass: 'unknown_outcome',
          detail: { tool: row.tool_name, reason: change.lastError ?? null },
        });
      }
      if (audit) {
        await appendRuntimeAudit(t, run.audit, {
          action: 'tool.invocation',
          decision: audit.decision,
          toolName: row.tool_name,
          latencyMs: audit.latencyMs ?? null,
          errorType: audit.errorType ?? null,
          details: { invocation_id: row.invocation_id, attempts: next.attempts, ...audit.details },
        });
      }
      return next;
    });
    countOutcome(change.to);
    return moved;
  }

  function requireTool(run: Run, row: ToolInvocationRow): ToolDefinition {
    if (!run.tool) {
      throw ApplicationFailure.nonRetryable(
        `tool ${row.tool_name} is not in the pinned revision`,
        'ConfigurationError',
      );
    }
    return run.tool;
  }

  /** Moves a row forward from whatever state it is in until it settles or must wait. */
  async function drive(run: Run, start: ToolInvocationRow): Promise<ToolOutcome> {
    let row = start;
    for (let i = 0; i < MAX_TRANSITIONS; i++) {
      switch (row.status) {
        case 'accepted':
        case 'rejected':
        case 'refused':
        case 'failed':
          return settled(row);
        case 'manual':
          return { status: 'manual', invocationId: row.invocation_id };
        case 'awaiting_approval':
          return {
            status: 'awaiting_approval',
            invocationId: row.invocation_id,
            deadline: (row.approval_deadline ?? new Date()).toISOString(),
          };
        case 'prepared': {
          const tool = requireTool(run, row);
          const claimed = await tx(run.tenantId, (t) =>
            claimDispatch(t, {
              tenantId: run.tenantId,
              invocationId: row.invocation_id,
              owner: run.owner,
              leaseSeconds,
            }),
          );
          if (claimed) return dispatch(run, tool, claimed);
          break;
        }
        case 'dispatching':
        case 'reconciling':
        case 'unknown': {
          if (row.status !== 'unknown' && row.lease_live) {
            // Another attempt holds a live claim; Temporal retries this one after back-off.
            throw ApplicationFailure.retryable(
              `tool invocation ${row.invocation_id} is ${row.status} under another attempt`,
              'ToolBusy',
            );
          }
          const tool = requireTool(run, row);
          const claimed = await tx(run.tenantId, (t) =>
            claimReconcile(t, {
              tenantId: run.tenantId,
              invocationId: row.invocation_id,
              owner: run.owner,
              leaseSeconds,
            }),
          );
          if (claimed) return reconcile(run, tool, claimed);
          break;
        }
        default: {
          const exhaustive: never = row.status;
          throw new Error(`unexpected tool invocation status ${String(exhaustive)}`);
        }
      }
      const current = await tx(run.tenantId, (t) => invocationById(t, run.tenantId, row.invocation_id));
      if (!current) throw ApplicationFailure.nonRetryable(`tool invocation vanished`, 'NotFound');
      row = current;
    }
    throw ApplicationFailure.retryable(`tool invocation ${row.invocation_id} keeps changing`, 'ToolBusy');
  }

  /**
   * transition() for a provider's answer (accepted, rejected, a receipt found), retried on transient
   * database errors until the claim's lease (from `claimedAt`, less a second for the claim's own
   * round trip) runs out: the call was made, and an answer lost to a database blip would send the
   * invocation to reconciliation or to an operator for nothing. A retry past the lease is harmless
   * (the CAS is fenced); the lease only bounds the wait. A miss on a retry is ours when the row is
   * in the target status under our fence: the earlier try committed and its answer was lost.
   */
  async function recordAnswer(
    run: Run,
    row: ToolInvocationRow,
    claimedAt: number,
    from: readonly ToolInvocationStatus[],
    change: InvocationChange,
    audit: Parameters<typeof transition>[4],
  ): Promise<ToolInvocationRow> {
    return retryTransient(
      async (tryNo) => {
        try {
          return await transition(run, row, from, change, audit);
        } catch (err) {
          if (tryNo === 0 || !(err instanceof ApplicationFailure && err.type === FENCED_OUT)) throw err;
          const current = await tx(run.tenantId, (t) => invocationById(t, run.tenantId, row.invocation_id));
          if (current?.status === change.to && current.fencing_token === row.fencing_token) {
            countOutcome(change.to);
            return current;
          }
          throw err;
        }
      },
      {
        until: claimedAt + leaseSeconds * 1000 - 1000,
        log: deps.log,
        what: 'tool receipt',
        context: { tenantId: run.tenantId, invocationId: row.invocation_id },
      },
    );
  }

  /** Holding a dispatching claim: send once, record what the provider said. */
  async function dispatch(run: Run, tool: ToolDefinition, row: ToolInvocationRow): Promise<ToolOutcome> {
    const started = performance.now();
    const result = await dispatchToolCall({
      url: tool.endpoint_url,
      idempotencyKey: row.idempotency_key,
      args: row.arguments,
      timeoutMs,
    });
    const latencyMs = performance.now() - started;
    deps.metrics?.toolDispatches.inc({ result: result.kind });
    deps.metrics?.toolDispatchSeconds.observe({ result: result.kind }, latencyMs / 1000);
    switch (result.kind) {
      case 'accepted': {
        const next = await recordAnswer(
          run,
          row,
          started,
          ['dispatching'],
          {
            to: 'accepted',
            providerReceipt: result.body,
            providerReceiptRef: receiptRef(result.body),
            lastError: null,
            resolved: true,
            release: true,
          },
          { decision: 'accepted', latencyMs, details: { http_status: result.httpStatus } },
        );
        return settled(next);
      }
      case 'rejected': {
        const next = await recordAnswer(
          run,
          row,
          started,
          ['dispatching'],
          {
            to: 'rejected',
            providerReceipt: result.body,
            lastError: `http_${result.httpStatus}`,
            resolved: true,
            release: true,
          },
          { decision: 'rejected', latencyMs, errorType: `http_${result.httpStatus}` },
        );
        return settled(next);
      }
      case 'not_sent':
        await transition(run, row, ['dispatching'], {
          to: 'prepared',
          lastError: result.reason,
          release: true,
        });
        throw ApplicationFailure.create({
          message: `tool ${tool.name} was not reached (${result.reason}); retrying with the same key`,
          type: 'ToolRetryable',
          ...(result.retryAfterMs === undefined ? {} : { nextRetryDelay: result.retryAfterMs }),
        });
      case 'unknown': {
        // Recorded before anything else happens, so a crash here leaves an explicit unknown.
        const unknown = await transition(run, row, ['dispatching'], {
          to: 'unknown',
          lastError: result.reason,
        });
        const reconciling = await transition(run, unknown, ['unknown'], {
          to: 'reconciling',
          reconciled: true,
        });
        return reconcile(run, tool, reconciling);
      }
      default: {
        const exhaustive: never = result;
        return exhaustive;
      }
    }
  }

  /** Holding a reconciling claim: establish by the same key whether the provider accepted. */
  async function reconcile(run: Run, tool: ToolDefinition, row: ToolInvocationRow): Promise<ToolOutcome> {
    const claimedAt = performance.now();
    if (!tool.side_effect) {
      // Nothing to protect: sending again is harmless.
      await transition(run, row, ['reconciling'], { to: 'prepared', release: true });
      throw ApplicationFailure.retryable(`side-effect-free tool ${tool.name} is sent again`, 'ToolRetryable');
    }
    if (!tool.receipt_url) return manual(run, row, 'unknown_outcome_no_receipt_url');

    const receipt = await fetchToolReceipt({
      receiptUrlTemplate: tool.receipt_url,
      idempotencyKey: row.idempotency_key,
      timeoutMs,
    });
    switch (receipt.kind) {
      case 'found': {
        const next = await recordAnswer(
          run,
          row,
          claimedAt,
          ['reconciling'],
          {
            to: 'accepted',
            providerReceipt: receipt.receipt,
            providerReceiptRef: receiptRef(receipt.receipt),
            resolved: true,
            reconciled: true,
            release: true,
          },
          { decision: 'accepted', details: { reconciled: true, after: row.last_error } },
        );
        return settled(next);
      }
      case 'not_found':
        if (tool.idempotency === 'provider_key') {
          // Confirmed not applied and the provider deduplicates by key: queue it again, same key.
          await transition(run, row, ['reconciling'], {
            to: 'prepared',
            lastError: 'not_accepted',
            reconciled: true,
            release: true,
          });
          throw ApplicationFailure.retryable(
            `tool ${tool.name} did not accept the call; dispatching again with the same key`,
            'ToolRetryable',
          );
        }
        return manual(run, row, 'not_accepted_without_provider_idempotency');
      case 'error': {
        const age = (row.dispatch_age_s ?? 0) + (performance.now() - claimedAt) / 1000;
        if (age >= tool.reconcile_window_s) return manual(run, row, 'reconcile_window_exceeded');
        await transition(run, row, ['reconciling'], {
          to: 'reconciling',
          lastError: receipt.reason,
          reconciled: true,
          release: true,
        });
        throw ApplicationFailure.retryable(
          `receipt for tool ${tool.name} unavailable (${receipt.reason}); reconciling again`,
          'ToolReconciling',
        );
      }
      default: {
        const exhaustive: never = receipt;
        return exhaustive;
      }
    }
  }

  async function manual(run: Run, row: ToolInvocationRow, reason: string): Promise<ToolOutcome> {
    await transition(
      run,
      row,
      ['reconciling'],
      { to: 'manual', lastError: reason, reconciled: true, release: true },
      { decision: 'manual', errorType: reason },
    );
    return { status: 'manual', invocationId: row.invocation_id };
  }

  async function refuse(
    input: InvokeToolInput,
    run: Run,
    idempotencyKey: string,
    errorType: 'tool_not_allowed' | 'invalid_arguments',
    message: string,
  ): Promise<ToolInvocationRow> {
    const { call } = input;
    const args = isPlainObject(call.arguments) ? call.arguments : { _non_object_arguments: call.arguments };
    const stored = await tx(input.tenantId, async (t) => {
      const res = await insertInvocation(t, {
        tenantId: input.tenantId,
        invocationId: newId('inv'),
        eventId: input.eventId,
        ...positionOf(input),
        toolName: TOOL_NAME.test(call.name) ? call.name : sanitizeName(call.name),
        capabilityDigest: run.tool
          ? toolCapabilityDigest(run.tool)
          : contentDigest({ not_allowed: call.name }),
        idempotencyKey,
        requestDigest: contentDigest(call.arguments ?? null),
        arguments: args,
        status: 'refused',
        requiresApproval: false,
        approvalTimeoutS: null,
        lastError: message.slice(0, 2000),
        providerReceipt: undefined,
      });
      if (res?.created) {
        await appendRuntimeAudit(t, run.audit, {
          action: 'tool.invocation',
          decision: 'refused',
          toolName: res.row.tool_name,
          errorType,
          details: { invocation_id: res.row.invocation_id },
        });
      }
      return res;
    });
    if (!stored) throw notRunning(input.eventId);
    if (stored.created) countOutcome('refused');
    return stored.row;
  }

  /**
   * Records one tool call under its stable key, before anything is sent: refused (never sent) when
   * the revision does not allow the tool or the arguments fail its schema, else prepared (or
   * awaiting approval). Idempotent: a call recorded earlier (by a retried attempt, an earlier run or
   * the step's first call) is returned as it stands.
   */
  async function recordCall(
    input: InvokeToolInput,
    tools: ToolDefinition[],
    audit: RuntimeAuditContext,
    owner: string,
  ): Promise<{ run: Run; row: ToolInvocationRow }> {
    const { tenantId, eventId, call } = input;
    const key = toolIdempotencyKey(
      eventId,
      input.step,
      input.ordinal ?? 0,
      TOOL_NAME.test(call.name) ? call.name : sanitizeName(call.name),
      contentDigest(call.arguments ?? null),
    );
    const tool = findTool(tools, call.name);
    const run: Run = { tenantId, owner, tool, audit };
    if (!tool)
      return {
        run,
        row: await refuse(input, run, key, 'tool_not_allowed', `tool_not_allowed: ${call.name}`),
      };
    const check = validateToolArguments(tool, call.arguments);
    if (!check.ok) {
      const why = `invalid_arguments: ${check.errors.join('; ')}`;
      return { run, row: await refuse(input, run, key, 'invalid_arguments', why) };
    }
    const args = call.arguments as Record<string, unknown>;
    const requestDigest = contentDigest(args);
    const stored = await tx(tenantId, async (t) => {
      // A call prepared before 0019 under its model-call-id key continues under that key.
      const legacy = await invocationByKey(
        t,
        tenantId,
        eventId,
        legacyIdempotencyKey(eventId, input.step, call.id),
      );
      if (legacy) return { row: legacy, created: false };
      const res = await insertInvocation(t, {
        tenantId,
        invocationId: newId('inv'),
        eventId,
        ...positionOf(input),
        toolName: tool.name,
        capabilityDigest: toolCapabilityDigest(tool),
        idempotencyKey: key,
        requestDigest,
        arguments: args,
        status: tool.requires_approval ? 'awaiting_approval' : 'prepared',
        requiresApproval: tool.requires_approval,
        approvalTimeoutS: tool.approval_timeout_s,
        lastError: null,
        providerReceipt: undefined,
      });
      if (res?.created && res.row.status === 'awaiting_approval') {
        await appendRuntimeAudit(t, audit, {
          action: 'tool.invocation',
          decision: 'awaiting_approval',
          toolName: tool.name,
          details: { invocation_id: res.row.invocation_id },
        });
      }
      return res;
    });
    if (!stored) throw notRunning(eventId);
    if (stored.row.request_digest !== requestDigest || stored.row.tool_name !== tool.name) {
      throw ApplicationFailure.nonRetryable(
        `tool call ${call.id} was prepared with different arguments`,
        'RequestDigestMismatch',
      );
    }
    return { run, row: stored.row };
  }

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
      const { run, row } = await recordCall(input, tools, audit, owner);
      // Then the step's later calls (prepared, nothing sent): a run resumed in the middle of the
      // step finds every call the model asked for. Not one that needs an approval: its clock would
      // start before anyone could see it (it is recorded when the run reaches it).
      for (const [ordinal, call] of (input.stepCalls ?? []).entries()) {
        if (ordinal === 0 || findTool(tools, call.name)?.requires_approval) continue;
        await recordCall({ ...input, call, ordinal, stepCalls: undefined }, tools, audit, owner);
      }
      return holdWhileWaiting(tenantId, eventId, await drive(run, row));
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
        await drive({ tenantId, owner: attemptOwner(deps.workerId), tool, audit }, found.row),
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
      if (expired.expired) countOutcome('failed');
      return expired;
    },
  };
}

const SETTLED: readonly ToolInvocationStatus[] = ['accepted', 'rejected', 'refused', 'failed'];

/**
 * The tool calls an execution recorded, for a resumed run to rebuild its turn from instead of
 * asking the model again (a Temporal reset or a repair would otherwise get new calls from the
 * model). Empty when a call predates 0019 (no recorded position): such a run asks the model again,
 * and the call's legacy key still finds its row.
 */
export async function recordedToolCalls(
  deps: ActivityDeps,
  tenantId: string,
  eventId: string,
): Promise<RecordedToolCall[]> {
  const rows = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (t) =>
    invocationsOfEvent(t, tenantId, eventId),
  );
  if (rows.some((r) => r.step === null || r.call_ordinal === null)) return [];
  return rows.map((r) => {
    const done = SETTLED.includes(r.status) ? settled(r) : null;
    return {
      step: r.step!,
      ordinal: r.call_ordinal!,
      invocationId: r.invocation_id,
      call: {
        id: r.model_call_id ?? `call_${r.step}_${r.call_ordinal}`,
        name: r.tool_name,
        arguments: '_non_object_arguments' in r.arguments ? r.arguments._non_object_arguments : r.arguments,
      },
      result:
        done && done.status !== 'manual' && done.status !== 'awaiting_approval'
          ? { status: done.status, body: done.body }
          : null,
    };
  });
}

/** The body the model sees for a settled invocation. */
function settled(row: ToolInvocationRow): ToolOutcome {
  const invocationId = row.invocation_id;
  const resolution = row.resolution;
  switch (row.status) {
    case 'accepted':
      if (resolution) {
        return {
          status: 'accepted',
          invocationId,
          body: resolution.provider_receipt ?? { outcome: 'accepted', reason: resolution.reason ?? null },
        };
      }
      return { status: 'accepted', invocationId, body: row.provider_receipt ?? {} };
    case 'rejected':
      if (resolution) {
        return {
          status: 'rejected',
          invocationId,
          body: { error: 'rejected', reason: resolution.reason ?? null },
        };
      }
      return { status: 'rejected', invocationId, body: row.provider_receipt ?? { error: row.last_error } };
    case 'refused':
    case 'failed':
      return { status: row.status, invocationId, body: { error: row.last_error } };
    default:
      throw new Error(`invocation ${invocationId} is ${row.status}, not settled`);
  }
}

/** Where a call stands in its execution, stored with it (the rebuilt transcript of a resumed run). */
function positionOf(input: InvokeToolInput) {
  return {
    step: input.step,
    callOrdinal: input.ordinal ?? 0,
    modelCallId: input.call.id ? input.call.id.slice(0, 200) : null,
  };
}

function notRunning(eventId: string) {
  return ApplicationFailure.nonRetryable(`message ${eventId} is no longer running`, FENCED_OUT);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function sanitizeName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'unnamed';
}
