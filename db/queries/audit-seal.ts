import type { Sql } from 'postgres';
import { type DbRole, withTenantTx } from '../tx';

// Sealing: linking the runtime's pending audit entries (audit_pending) into the tenant's hash chain
// (audit_log), through audit_seal (migration 0030). Each batch is its own short transaction under
// the chain's lock, so a sealer never holds the lock across anything but its own statement and
// commit. The connection must carry the audit key (db/client.ts `auditKey`).

/** Rows sealed per transaction (audit_seal caps it at 10,000). */
export const SEAL_BATCH = 500;

export interface SealResult {
  sealed: number;
  /**
   * the audit_id of a pending entry whose mac does not hold: it and everything after it stay pending
   * until an operator quarantines it (audit_quarantine)
   */
  refused: string | null;
  /** another transaction held the chain (only when not waiting): try again later */
  busy: boolean;
  /** entries were left because `maxRows` was reached */
  more: boolean;
}

interface SealBatch {
  sealed: number;
  more: boolean;
  refused: string | null;
  busy: boolean;
}

/**
 * Seals the tenant's pending entries, oldest first, in batches of SEAL_BATCH until none are left
 * (or `maxRows`, or a refused row). `wait: false` gives up at once when another sealer (or an admin
 * append) holds the tenant's chain, which is what a background loop wants; `wait: true` queues
 * behind it, for a caller that needs everything committed so far sealed (verification).
 */
export async function sealAudit(
  sql: Sql,
  tenantId: string,
  opts: { role: DbRole; wait: boolean; maxRows?: number },
): Promise<SealResult> {
  const maxRows = opts.maxRows ?? 10_000;
  const out: SealResult = { sealed: 0, refused: null, busy: false, more: false };
  for (;;) {
    const limit = Math.min(SEAL_BATCH, maxRows - out.sealed);
    if (limit <= 0) return { ...out, more: true };
    const batch = await withTenantTx(sql, { role: opts.role, tenantId }, async (tx) => {
      const [row] = await tx<{ r: SealBatch }[]>`
        select audit_seal(${tenantId}, ${limit}::int, ${opts.wait}) as r`;
      return row!.r;
    });
    out.sealed += batch.sealed;
    if (batch.busy) return { ...out, busy: true };
    if (batch.refused) return { ...out, refused: batch.refused };
    if (!batch.more) return out;
  }
}

/**
 * Tenants with pending entries, the longest-waiting first, leaving out `skip` (the tenants a
 * sealer backs off from: audit_pending_tenants, cross-tenant).
 */
export async function pendingAuditTenants(
  sql: Sql,
  limit: number,
  skip: readonly string[] = [],
): Promise<string[]> {
  const rows = await sql<{ tenant_id: string }[]>`
    select tenant_id from audit_pending_tenants(${limit}::int, ${sql.array([...skip])}::text[])`;
  return rows.map((r) => r.tenant_id);
}
