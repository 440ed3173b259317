import type { TransactionSql } from 'postgres';
import { jsonb } from '../../json';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type BackendProfileStatus = 'active' | 'suspended' | 'disabled';

export interface BackendProfileRow {
  profile_id: string;
  profile_key: string;
  provider: 'postgres';
  config: Record<string, unknown>;
  /** object storage of artifacts (lib/artifact-config.ts) */
  artifacts: Record<string, unknown>;
  status: BackendProfileStatus;
  version: number;
  content_digest: string;
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  profile_id, profile_key, provider, config, artifacts, status, version, content_digest, created_at, updated_at,
  ${sortTs(tx, 'created_at')} as sort_ts`;

export async function insertBackendProfile(
  tx: TransactionSql,
  p: {
    tenantId: string;
    profileId: string;
    profileKey: string;
    provider: 'postgres';
    config: Record<string, unknown>;
    artifacts: Record<string, unknown>;
    contentDigest: string;
  },
): Promise<BackendProfileRow> {
  const [row] = await tx<BackendProfileRow[]>`
    insert into backend_profile (tenant_id, profile_id, profile_key, provider, config, artifacts, content_digest)
    values (${p.tenantId}, ${p.profileId}, ${p.profileKey}, ${p.provider}, ${jsonb(tx, p.config)},
            ${jsonb(tx, p.artifacts)}, ${p.contentDigest})
    returning ${columns(tx)}`;
  return row!;
}

export async function getBackendProfile(
  tx: TransactionSql,
  tenantId: string,
  profileId: string,
): Promise<BackendProfileRow | null> {
  const rows = await tx<BackendProfileRow[]>`
    select ${columns(tx)} from backend_profile where tenant_id = ${tenantId} and profile_id = ${profileId}`;
  return rows[0] ?? null;
}

export async function getBackendProfileStatus(
  tx: TransactionSql,
  tenantId: string,
  profileId: string,
): Promise<BackendProfileStatus | null> {
  const rows = await tx<{ status: BackendProfileStatus }[]>`
    select status from backend_profile where tenant_id = ${tenantId} and profile_id = ${profileId}`;
  return rows[0]?.status ?? null;
}

export async function listBackendProfiles(
  tx: TransactionSql,
  p: { tenantId: string } & PageParams,
): Promise<Page<BackendProfileRow>> {
  const rows = await tx<BackendProfileRow[]>`
    select ${columns(tx)} from backend_profile
    where tenant_id = ${p.tenantId} ${keysetAfter(tx, p.cursor, 'created_at', 'profile_id')}
    order by created_at desc, profile_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.profile_id }));
}

/** Compare-and-set on version and on the allowed previous statuses; null when it did not apply. */
export async function setBackendProfileStatus(
  tx: TransactionSql,
  p: {
    tenantId: string;
    profileId: string;
    status: BackendProfileStatus;
    from: readonly BackendProfileStatus[];
    expectedVersion: number;
  },
): Promise<BackendProfileRow | null> {
  const [row] = await tx<BackendProfileRow[]>`
    update backend_profile set status = ${p.status}, version = version + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and profile_id = ${p.profileId} and version = ${p.expectedVersion}
      and status in ${tx(p.from as string[])}
    returning ${columns(tx)}`;
  return row ?? null;
}

/** Read after the UPDATE's row lock, so a concurrent default assignment is seen (seeds' lock order). */
export async function isTenantDefaultBackend(
  tx: TransactionSql,
  tenantId: string,
  profileId: string,
): Promise<boolean> {
  const rows = await tx`
    select 1 from tenant where tenant_id = ${tenantId} and default_backend_profile_id = ${profileId}`;
  return rows.length > 0;
}
