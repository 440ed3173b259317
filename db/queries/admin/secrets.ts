import type { TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

/** Metadata only: no query in the admin path ever returns a value or ciphertext to a route. */
export interface SecretRow {
  secret_ref: string;
  name: string;
  current_version: number;
  status: 'active' | 'disabled';
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  secret_ref, name, current_version, status, created_at, updated_at, ${sortTs(tx, 'created_at')} as sort_ts`;

/** The secret row and its version 1, sealed by the caller (AAD binds it to tenant and ref). */
export async function insertSecret(
  tx: TransactionSql,
  p: { tenantId: string; secretRef: string; name: string; keyId: string; sealed: Buffer },
): Promise<SecretRow> {
  const [row] = await tx<SecretRow[]>`
    insert into secret (tenant_id, secret_ref, name) values (${p.tenantId}, ${p.secretRef}, ${p.name})
    returning ${columns(tx)}`;
  await tx`
    insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
    values (${p.tenantId}, ${p.secretRef}, 1, ${p.keyId}, ${p.sealed})`;
  return row!;
}

/** Locks the secret and bumps its current version; the caller then stores that version's value. */
export async function bumpSecretVersion(
  tx: TransactionSql,
  p: { tenantId: string; name: string },
): Promise<SecretRow | null> {
  const [row] = await tx<SecretRow[]>`
    update secret set current_version = current_version + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and name = ${p.name}
    returning ${columns(tx)}`;
  return row ?? null;
}

export async function insertSecretVersion(
  tx: TransactionSql,
  p: { tenantId: string; secretRef: string; version: number; keyId: string; sealed: Buffer },
): Promise<void> {
  await tx`
    insert into secret_version (tenant_id, secret_ref, version, key_id, ciphertext)
    values (${p.tenantId}, ${p.secretRef}, ${p.version}, ${p.keyId}, ${p.sealed})`;
}

export async function listSecrets(
  tx: TransactionSql,
  p: { tenantId: string } & PageParams,
): Promise<Page<SecretRow>> {
  const rows = await tx<SecretRow[]>`
    select ${columns(tx)} from secret
    where tenant_id = ${p.tenantId} ${keysetAfter(tx, p.cursor, 'created_at', 'secret_ref')}
    order by created_at desc, secret_ref desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.secret_ref }));
}

export async function getSecretStatus(
  tx: TransactionSql,
  tenantId: string,
  secretRef: string,
): Promise<'active' | 'disabled' | null> {
  const rows = await tx<{ status: 'active' | 'disabled' }[]>`
    select status from secret where tenant_id = ${tenantId} and secret_ref = ${secretRef}`;
  return rows[0]?.status ?? null;
}

/**
 * The current sealed value of an active secret, share-locked so it cannot be rotated or
 * disabled while a binding is activated against it. For shape checks in the admin path only.
 */
export async function lockSealedSecret(
  tx: TransactionSql,
  tenantId: string,
  secretRef: string,
): Promise<{ status: 'active' | 'disabled'; key_id: string; ciphertext: Buffer } | null> {
  const rows = await tx<{ status: 'active' | 'disabled'; key_id: string; ciphertext: Buffer }[]>`
    select s.status, v.key_id, v.ciphertext
    from secret s
    join secret_version v
      on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref and v.version = s.current_version
    where s.tenant_id = ${tenantId} and s.secret_ref = ${secretRef}
    for share of s`;
  return rows[0] ?? null;
}
