import type { Sql } from 'postgres';
import type { TransactionSql } from '../tx';

// The housekeeping functions of migration 0025 (SECURITY DEFINER, owned by switchyard_janitor or
// switchyard_lookup): one autocommit statement each, bounded per call.

export interface AuditRetentionRun {
  tenant_id: string;
  removed: number;
  upto_seq: number;
  /** set when the tenant was left alone: its boundary row's digest does not hold */
  refused?: 'boundary_invalid';
}

/** Removes audit rows past each tenant's audit_retention_days, moving its signed checkpoint. */
export async function auditRetentionPrune(sql: Sql, limit: number): Promise<AuditRetentionRun[]> {
  const [row] = await sql<{ r: AuditRetentionRun[] }[]>`select audit_retention_prune(${limit}::int) as r`;
  return row?.r ?? [];
}

/** Rate-limit windows and replay-guard rows past their use (10 minutes). */
export async function housekeepingPrune(
  sql: Sql,
  limit: number,
): Promise<{ rate_limit_windows: number; replay_guards: number }> {
  const [row] = await sql<{ r: { rate_limit_windows: number; replay_guards: number } }[]>`
    select housekeeping_prune(${limit}::int) as r`;
  return row!.r;
}

/** Open dead letters by kind, across tenants. */
export async function deadLetterDepth(sql: Sql, timeoutMs: number): Promise<{ kind: string; n: number }[]> {
  const query = sql<{ kind: string; n: number }[]>`select kind, n::int as n from dead_letter_depth()`;
  // A slow count is cancelled in the server too, not only given up on: scrapes must not pile up.
  const timer = setTimeout(() => query.cancel(), timeoutMs);
  try {
    return await query;
  } finally {
    clearTimeout(timer);
  }
}

export interface RetentionCheckpoint {
  seq: number;
  digest: string;
  signature: string;
}

/** Where the tenant's chain starts after retention (in the tenant's transaction); null: at seq 1. */
export async function retentionCheckpoint(
  tx: TransactionSql,
  tenantId: string,
): Promise<RetentionCheckpoint | null> {
  const [row] = await tx<RetentionCheckpoint[]>`
    select seq, digest, signature from audit_retention_checkpoint where tenant_id = ${tenantId}`;
  return row ?? null;
}
