import type { TransactionSql } from 'postgres';
import { type AuditRecord, auditColumns } from '../audit';
import type { Page, PageParams } from './page';
import { toPage } from './page';

/** Newest entry first (by chain position); the cursor key is the seq. */
export async function listAuditEvents(
  tx: TransactionSql,
  p: { tenantId: string; action?: string } & PageParams,
): Promise<Page<AuditRecord>> {
  const rows = await tx<AuditRecord[]>`
    select ${auditColumns(tx)} from audit_log
    where tenant_id = ${p.tenantId}
      ${p.action === undefined ? tx`` : tx`and action = ${p.action}`}
      ${p.cursor ? tx`and seq < ${Number(p.cursor.k)}` : tx``}
    order by seq desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: String(r.seq), i: r.audit_id }));
}
