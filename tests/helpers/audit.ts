import type { Sql } from 'postgres';
import { sealAudit } from '../../db/queries/audit-seal';

/**
 * Seals the tenant's pending audit entries now (what the worker's sealer does in the background,
 * runtime/audit-sealer.ts), so a test reading audit_log right after a message finished sees the
 * runtime's entries. Waits for a sealer holding the chain; throws if an entry was refused.
 */
export async function sealNow(sql: Sql, tenantId: string): Promise<void> {
  const r = await sealAudit(sql, tenantId, { role: 'tenant_app_writer', wait: true });
  if (r.refused) throw new Error(`audit sealing refused ${r.refused} for ${tenantId}`);
}
