import type { TransactionSql } from 'postgres';
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
  last_error: string | null;
  created_at: Date;
  dispatched_at: Date | null;
  resolved_at: Date | null;
  sort_ts: string;
}

export const toolInvocationColumns = (tx: TransactionSql) => tx`
  invocation_id, event_id, session_id, tool_name, status, attempts, idempotency_key, requires_approval,
  last_error, created_at, dispatched_at, resolved_at, ${sortTs(tx, 'created_at')} as sort_ts`;

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
