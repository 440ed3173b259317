import type { Sql } from 'postgres';
import type { TransactionSql } from '../tx';
import type { ArtifactRow } from './artifacts';

// Artifact retention (migration 0040): the cross-tenant listing is the lookup role's function; the
// mark and the delete are the owner's, scoped to the transaction's tenant by row-level security.
// Order per row: mark → delete the object → delete the row (only a marked row can be deleted).

export type MarkedArtifact = Pick<
  ArtifactRow,
  'artifact_id' | 'content_ref' | 'storage' | 'store_location' | 'backend_profile_id' | 'size_bytes'
>;

/** Tenants with artifacts past their artifact_retention_days (or marked ones left by a failed run). */
export async function artifactRetentionTenants(sql: Sql, limit: number): Promise<string[]> {
  const rows = await sql<{ tenant_id: string }[]>`
    select tenant_id from artifact_retention_tenants(${limit}::int)`;
  return rows.map((r) => r.tenant_id);
}

/** Marks up to `limit` of the tenant's due artifacts (left-over marked ones first) and returns them. */
export async function markExpiredArtifacts(
  tx: TransactionSql,
  tenantId: string,
  limit: number,
): Promise<MarkedArtifact[]> {
  const marked = await tx<Omit<MarkedArtifact, 'store_location'>[]>`
    select artifact_id, content_ref, storage, backend_profile_id, size_bytes::float8 as size_bytes
    from artifact_retention_mark(${tenantId}, ${limit}::int)`;
  if (marked.length === 0) return [];
  // Where each object was written (0044; the mark function's result predates the column).
  const located = await tx<{ artifact_id: string; store_location: string | null }[]>`
    select artifact_id, store_location from artifact
    where tenant_id = ${tenantId} and artifact_id = any(${marked.map((m) => m.artifact_id)}::text[])`;
  const where = new Map(located.map((r) => [r.artifact_id, r.store_location]));
  return marked.map((m) => ({ ...m, store_location: where.get(m.artifact_id) ?? null }));
}

/** Deletes the tenant's marked rows among `artifactIds` (their objects are gone); how many went. */
export async function deleteMarkedArtifacts(
  tx: TransactionSql,
  tenantId: string,
  artifactIds: readonly string[],
): Promise<number> {
  if (artifactIds.length === 0) return 0;
  const [row] = await tx<{ n: number }[]>`
    select artifact_retention_delete(${tenantId}, ${artifactIds as string[]}::text[]) as n`;
  return row?.n ?? 0;
}
