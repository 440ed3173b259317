import { ApplicationFailure } from '@temporalio/activity';
import type { TransactionSql } from 'postgres';
import type { ToolDefinition } from '../../agents/tools';
import { insertDeadLetter } from '../../db/queries/dead-letters';
import {
  type InvocationChange,
  invocationById,
  type ToolInvocationRow,
  type ToolInvocationStatus,
  transitionInvocation,
} from '../../db/queries/tools';
import { withTenantTx } from '../../db/tx';
import { appendRuntimeAudit, type RuntimeAuditContext } from '../audit-runtime';
import { retryTransient } from '../db-retry';
import type { ActivityDeps } from '../deps';
import { FENCED_OUT } from '../failures';

// What every step of a tool call's state machine shares (dispatch.ts, reconcile.ts, drive.ts,
// record.ts): the tenant transaction, the claim lease, the outcome metric and the fenced state
// change with its audit entry and dead letter. Built once per worker by toolActivities.

/** One attempt working one invocation: its tenant, its claim owner, the pinned tool and audit context. */
export interface ToolRun {
  tenantId: string;
  owner: string;
  tool: ToolDefinition | null;
  audit: RuntimeAuditContext;
}

/** What a fenced state change may add to the tenant's audit chain. */
export interface TransitionAudit {
  decision: string;
  latencyMs?: number;
  errorType?: string | null;
  details?: Record<string, unknown>;
}

export type ToolSteps = ReturnType<typeof toolSteps>;

/** The states switchyard_tool_invocations_total counts an invocation reaching. */
const REPORTED: readonly ToolInvocationStatus[] = ['accepted', 'rejected', 'refused', 'failed', 'manual'];

export function toolSteps(deps: ActivityDeps) {
  const tx = <T>(tenantId: string, fn: (tx: TransactionSql) => Promise<T>) =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, fn);
  /** One HTTP call's bound (the provider's or the receipt endpoint's). */
  const timeoutMs = deps.sendTimeoutMs;
  /** A claim outlives the longest HTTP call it makes; past it, the holder is presumed dead. */
  const leaseSeconds = Math.ceil(timeoutMs / 1000) + 10;
  /** The invocation reached one of the states the metric reports (a settled one, or an operator's). */
  const countOutcome = (status: ToolInvocationStatus) => {
    if (REPORTED.includes(status)) deps.metrics?.toolInvocations.inc({ outcome: status });
  };

  /** A CAS that must succeed: a miss means a newer claim owns the row. */
  async function transition(
    run: ToolRun,
    row: ToolInvocationRow,
    from: readonly ToolInvocationStatus[],
    change: InvocationChange,
    audit?: TransitionAudit,
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

  /**
   * transition() for a provider's answer (accepted, rejected, a receipt found), retried on transient
   * database errors until the claim's lease (from `claimedAt`, less a second for the claim's own
   * round trip) runs out: the call was made, and an answer lost to a database blip would send the
   * invocation to reconciliation or to an operator for nothing. A retry past the lease is harmless
   * (the CAS is fenced); the lease only bounds the wait. A miss on a retry is ours when the row is
   * in the target status under our fence: the earlier try committed and its answer was lost.
   */
  async function recordAnswer(
    run: ToolRun,
    row: ToolInvocationRow,
    claimedAt: number,
    from: readonly ToolInvocationStatus[],
    change: InvocationChange,
    audit: TransitionAudit,
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

  return { deps, tx, timeoutMs, leaseSeconds, countOutcome, transition, recordAnswer };
}
