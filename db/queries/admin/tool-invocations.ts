import type { TransactionSql } from 'postgres';
import { jsonb } from '../../json';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export interface ToolInvocationRow {
  invocation_id: string;
  event_id: string;
  session_id: string;
  tool_name: string;
  status: string;
  attempts: number;
  idempotency_key: string;
  requires_approval: boolean;
  approval_deadline: Date | null;
  last_error: string | null;
  resolution: Record<string, unknown> | null;
  created_at: Date;
  dispatched_at: Date | null;
  resolved_at: Date | null;
  sort_ts: string;
}

export const toolInvocationColumns = (tx: TransactionSql) => tx`
  invocation_id, event_id, session_id, tool_name, status, attempts, idempotency_key, requires_approval,
  approval_deadline, last_error, resolution, created_at, dispatched_at, resolved_at,
  ${sortTs(tx, 'created_at')} as sort_ts`;

export async function listToolInvocations(
  tx: TransactionSql,
  p: { tenantId: string; status?: string } & PageParams,
): Promise<Page<ToolInvocationRow>> {
  const rows = await tx<ToolInvocationRow[]>`
    select ${toolInvocationColumns(tx)} from tool_invocation
    where tenant_id = ${p.tenantId}
      ${p.status === undefined ? tx`` : tx`and status = ${p.status}`}
      ${keysetAfter(tx, p.cursor, 'created_at', 'invocation_id')}
    order by created_at desc, invocation_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.invocation_id }));
}

/**
 * One invocation, locked for an operator's decision, with the workflow of its message (the one to
 * signal afterwards) and whether its approval deadline has passed.
 */
export async function lockToolInvocation(
  tx: TransactionSql,
  tenantId: string,
  invocationId: string,
): Promise<(ToolInvocationRow & { workflow_id: string | null; approval_expired: boolean }) | null> {
  const [row] = await tx<(ToolInvocationRow & { workflow_id: string | null; approval_expired: boolean })[]>`
    select ${toolInvocationColumns(tx)}, (
             select e.workflow_id from message_event e
             where e.tenant_id = tool_invocation.tenant_id and e.event_id = tool_invocation.event_id
           ) as workflow_id,
           coalesce(approval_deadline <= now(), false) as approval_expired
    from tool_invocation
    where tenant_id = ${tenantId} and invocation_id = ${invocationId}
    for update`;
  return row ?? null;
}

/**
 * An operator's resolution of an outcome nobody could establish: manual → accepted | rejected,
 * with { outcome, reason, provider_receipt }. The fencing token moves on, so any attempt that
 * still holds an older claim can no longer write. Null when the invocation is not manual.
 */
export async function resolveManualInvocation(
  tx: TransactionSql,
  p: {
    tenantId: string;
    invocationId: string;
    outcome: 'accepted' | 'rejected';
    reason: string;
    providerReceipt: Record<string, unknown> | null;
  },
): Promise<ToolInvocationRow | null> {
  const resolution = { outcome: p.outcome, reason: p.reason, provider_receipt: p.providerReceipt };
  const [row] = await tx<ToolInvocationRow[]>`
    update tool_invocation
    set status = ${p.outcome}, resolution = ${jsonb(tx, resolution)}, resolved_at = now(),
        fencing_token = fencing_token + 1, claim_owner = null, claim_token = null, lease_expires_at = null,
        updated_at = now()
    where tenant_id = ${p.tenantId} and invocation_id = ${p.invocationId} and status = 'manual'
    returning ${toolInvocationColumns(tx)}`;
  if (row) {
    // The invocation's open dead letter is settled by the same decision.
    await tx`
      update dead_letter set status = 'discarded', resolved_at = now(), resolved_by = 'operator',
             resolution_reason = ${`resolved as ${p.outcome}: ${p.reason}`}
      where tenant_id = ${p.tenantId} and invocation_id = ${p.invocationId} and status = 'open'`;
  }
  return row ?? null;
}

/**
 * An operator's approval decision, before the approval deadline: approve → prepared (the worker
 * then dispatches it: a prepared row that requires approval was approved), deny → rejected with
 * { decision: 'deny', reason }. Null when the invocation is not awaiting approval (or its deadline
 * passed: the workflow's timer fails it).
 */
export async function decideApproval(
  tx: TransactionSql,
  p: { tenantId: string; invocationId: string; decision: 'approve' | 'deny'; reason: string },
): Promise<ToolInvocationRow | null> {
  const change =
    p.decision === 'approve'
      ? tx`status = 'prepared'`
      : tx`status = 'rejected', last_error = 'approval_denied', resolved_at = now(),
           resolution = ${jsonb(tx, { decision: 'deny', reason: p.reason })},
           fencing_token = fencing_token + 1`;
  const [row] = await tx<ToolInvocationRow[]>`
    update tool_invocation set ${change}, updated_at = now()
    where tenant_id = ${p.tenantId} and invocation_id = ${p.invocationId}
      and status = 'awaiting_approval' and requires_approval
      and (approval_deadline is null or approval_deadline > now())
    returning ${toolInvocationColumns(tx)}`;
  return row ?? null;
}
