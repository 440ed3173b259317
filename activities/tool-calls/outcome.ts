import type { RecordedToolCall, ToolCall } from '../../agents/messages';
import {
  invocationsOfEvent,
  type ToolInvocationRow,
  type ToolInvocationStatus,
} from '../../db/queries/tools';
import { withTenantTx } from '../../db/tx';
import type { ExecutionPlan } from '../../workflows/shared';
import type { ActivityDeps } from '../deps';

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
export function settled(row: ToolInvocationRow): ToolOutcome {
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
