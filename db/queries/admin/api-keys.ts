import type { TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type ApiKeyRole = 'tenant_admin' | 'tenant_viewer';

export interface ApiKeyRow {
  key_id: string;
  role: ApiKeyRole;
  status: 'active' | 'revoked';
  created_at: Date;
  revoked_at: Date | null;
  sort_ts: string;
}

export interface AuthenticatedKey {
  tenant_id: string;
  key_id: string;
  role: ApiKeyRole;
  /** the key's tenant's, for the request's trace sampling (telemetry/sampling.ts) */
  tenant_trace_sampling_rate: number;
}

/** The active key for a bearer-token digest, before any tenant is known (SECURITY DEFINER). */
export async function authenticateApiKey(
  tx: TransactionSql,
  keyDigest: string,
): Promise<AuthenticatedKey | null> {
  const rows = await tx<AuthenticatedKey[]>`
    select tenant_id, key_id, role, tenant_trace_sampling_rate
    from authenticate_admin_api_key(${keyDigest})`;
  return rows[0] ?? null;
}

/** Only the digest of the key is stored; the key itself exists in the 201 response alone. */
export async function insertApiKey(
  tx: TransactionSql,
  p: { tenantId: string; keyId: string; role: ApiKeyRole; keyDigest: string },
): Promise<ApiKeyRow> {
  const [row] = await tx<ApiKeyRow[]>`
    insert into admin_api_key (tenant_id, key_id, role, key_digest)
    values (${p.tenantId}, ${p.keyId}, ${p.role}, ${p.keyDigest})
    returning key_id, role, status, created_at, revoked_at, ${sortTs(tx, 'created_at')} as sort_ts`;
  return row!;
}

export async function listApiKeys(
  tx: TransactionSql,
  p: { tenantId: string } & PageParams,
): Promise<Page<ApiKeyRow>> {
  const rows = await tx<ApiKeyRow[]>`
    select key_id, role, status, created_at, revoked_at, ${sortTs(tx, 'created_at')} as sort_ts
    from admin_api_key
    where tenant_id = ${p.tenantId} ${keysetAfter(tx, p.cursor, 'created_at', 'key_id')}
    order by created_at desc, key_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.key_id }));
}

/** active → revoked. null: no such key in the tenant; false: it was already revoked. */
export async function revokeApiKey(
  tx: TransactionSql,
  p: { tenantId: string; keyId: string },
): Promise<ApiKeyRow | false | null> {
  const [row] = await tx<ApiKeyRow[]>`
    update admin_api_key set status = 'revoked', revoked_at = now()
    where tenant_id = ${p.tenantId} and key_id = ${p.keyId} and status = 'active'
    returning key_id, role, status, created_at, revoked_at, ${sortTs(tx, 'created_at')} as sort_ts`;
  if (row) return row;
  const [exists] =
    await tx`select 1 from admin_api_key where tenant_id = ${p.tenantId} and key_id = ${p.keyId}`;
  return exists ? false : null;
}
