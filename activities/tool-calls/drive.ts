import { ApplicationFailure } from '@temporalio/activity';
import type { ToolDefinition } from '../../agents/tools';
import {
  claimDispatch,
  claimReconcile,
  invocationById,
  type ToolInvocationRow,
} from '../../db/queries/tools';
import { dispatch } from './dispatch';
import { settled, type ToolOutcome } from './outcome';
import { reconcile } from './reconcile';
import type { ToolRun, ToolSteps } from './steps';

const MAX_TRANSITIONS = 6;

/** Moves a row forward from whatever state it is in until it settles or must wait. */
export async function drive(s: ToolSteps, run: ToolRun, start: ToolInvocationRow): Promise<ToolOutcome> {
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
        const claimed = await s.tx(run.tenantId, (t) =>
          claimDispatch(t, {
            tenantId: run.tenantId,
            invocationId: row.invocation_id,
            owner: run.owner,
            leaseSeconds: s.leaseSeconds,
          }),
        );
        if (claimed) return dispatch(s, run, tool, claimed);
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
        const claimed = await s.tx(run.tenantId, (t) =>
          claimReconcile(t, {
            tenantId: run.tenantId,
            invocationId: row.invocation_id,
            owner: run.owner,
            leaseSeconds: s.leaseSeconds,
          }),
        );
        if (claimed) return reconcile(s, run, tool, claimed);
        break;
      }
      default: {
        const exhaustive: never = row.status;
        throw new Error(`unexpected tool invocation status ${String(exhaustive)}`);
      }
    }
    const current = await s.tx(run.tenantId, (t) => invocationById(t, run.tenantId, row.invocation_id));
    if (!current) throw ApplicationFailure.nonRetryable(`tool invocation vanished`, 'NotFound');
    row = current;
  }
  throw ApplicationFailure.retryable(`tool invocation ${row.invocation_id} keeps changing`, 'ToolBusy');
}

function requireTool(run: ToolRun, row: ToolInvocationRow): ToolDefinition {
  if (!run.tool) {
    throw ApplicationFailure.nonRetryable(
      `tool ${row.tool_name} is not in the pinned revision`,
      'ConfigurationError',
    );
  }
  return run.tool;
}
