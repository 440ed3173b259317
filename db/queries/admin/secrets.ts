import type { TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

/** What a secret may be used for (db/schema/secret.ts); fixed at creation. */
export type SecretPurpose =
  | 'model_api_key'
  | 'telegram_bot'
  | 'wecom_app'
  | 'tool_credential'
  | 'object_storage';
export type SecretStatus = 'active' | 'disabled';

/** Metadata only: no query in the admin path ever returns a value or ciphertext to a route. */
export interface SecretRow {
  secret_ref: string;
  name: string;
  purpose: SecretPurpose;
  current_version: number;
  status: SecretStatus;
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  secret_ref, name, purpose, current_version, status, created_at, updated_at, ${sortTs(tx, 'created_at')} as sort_ts`;

/** The secret row and its version 1, sealed by the caller (AAD binds it to tenant and ref). */
export async function insertSecret(
  tx: TransactionSql,
  p: {
    tenantId: string;
    secretRef: string;
    name: string;
    purpose: SecretPurpose;
    keyId: string;
    sealed: Buffer;
  },
): Promise<SecretRow> {
  const [row] = await tx<SecretRow[]>`
    insert into secret (tenant_id, secret_ref, name, purpose)
    values (${p.tenantId}, ${p.secretRef}, ${p.name}, ${p.purpose})
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

/** Status and purpose of a secret, for checking a reference to it; null when it does not exist. */
export async function getSecretMeta(
  tx: TransactionSql,
  tenantId: string,
  secretRef: string,
): Promise<{ status: SecretStatus; purpose: SecretPurpose } | null> {
  const rows = await tx<{ status: SecretStatus; purpose: SecretPurpose }[]>`
    select status, purpose from secret where tenant_id = ${tenantId} and secret_ref = ${secretRef}`;
  return rows[0] ?? null;
}

export interface SealedSecret {
  status: SecretStatus;
  purpose: SecretPurpose;
  version: number;
  key_id: string;
  ciphertext: Buffer;
}

/**
 * The current sealed value of an active secret, share-locked so it cannot be rotated or
 * disabled while a binding is activated against it. For shape checks in the admin path only.
 */
export async function lockSealedSecret(
  tx: TransactionSql,
  tenantId: string,
  secretRef: string,
): Promise<SealedSecret | null> {
  const rows = await tx<SealedSecret[]>`
    select s.status, s.purpose, s.current_version as version, v.key_id, v.ciphertext
    from secret s
    join secret_version v
      on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref and v.version = s.current_version
    where s.tenant_id = ${tenantId} and s.secret_ref = ${secretRef}
    for share of s`;
  return rows[0] ?? null;
}
