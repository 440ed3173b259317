import type { TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type AppStatus = 'active' | 'disabled';

export interface AppRow {
  app_id: string;
  app_key: string;
  display_name: string;
  status: AppStatus;
  published_revision: number | null;
  version: number;
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  app_id, app_key, display_name, status, published_revision, version, created_at, updated_at,
  ${sortTs(tx, 'created_at')} as sort_ts`;

export async function insertApp(
  tx: TransactionSql,
  p: { tenantId: string; appId: string; appKey: string; displayName: string },
): Promise<AppRow> {
  const [row] = await tx<AppRow[]>`
    insert into agent_app (tenant_id, app_id, app_key, display_name)
    values (${p.tenantId}, ${p.appId}, ${p.appKey}, ${p.displayName})
    returning ${columns(tx)}`;
  return row!;
}

export async function getApp(tx: TransactionSql, tenantId: string, appId: string): Promise<AppRow | null> {
  const rows = await tx<AppRow[]>`
    select ${columns(tx)} from agent_app where tenant_id = ${tenantId} and app_id = ${appId}`;
  return rows[0] ?? null;
}

export async function listApps(
  tx: TransactionSql,
  p: { tenantId: string } & PageParams,
): Promise<Page<AppRow>> {
  const rows = await tx<AppRow[]>`
    select ${columns(tx)} from agent_app
    where tenant_id = ${p.tenantId} ${keysetAfter(tx, p.cursor, 'created_at', 'app_id')}
    order by created_at desc, app_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.app_id }));
}

export async function getAppStatus(
  tx: TransactionSql,
  tenantId: string,
  appId: string,
): Promise<AppStatus | null> {
  const rows = await tx<{ status: AppStatus }[]>`
    select status from agent_app where tenant_id = ${tenantId} and app_id = ${appId}`;
  return rows[0]?.status ?? null;
}

/** Share-locks the app if it is active, so it cannot be disabled before this transaction ends. */
export async function lockActiveApp(tx: TransactionSql, tenantId: string, appId: string): Promise<boolean> {
  const rows = await tx`
    select 1 from agent_app where tenant_id = ${tenantId} and app_id = ${appId} and status = 'active'
    for share`;
  return rows.length > 0;
}

/** Locks the app row: revision numbers are allocated one writer at a time (max + 1). */
export async function lockAppForRevision(
  tx: TransactionSql,
  tenantId: string,
  appId: string,
): Promise<{ status: AppStatus; next_revision: number } | null> {
  const [app] = await tx<{ status: AppStatus }[]>`
    select status from agent_app where tenant_id = ${tenantId} and app_id = ${appId} for update`;
  if (!app) return null;
  const [max] = await tx<{ max: number | null }[]>`
    select max(revision)::int as max from agent_app_revision where tenant_id = ${tenantId} and app_id = ${appId}`;
  return { status: app.status, next_revision: (max?.max ?? 0) + 1 };
}

/** published_revision moves only on the expected version of an active app whose revision exists. */
export async function publishApp(
  tx: TransactionSql,
  p: { tenantId: string; appId: string; revision: number; expectedVersion: number },
): Promise<AppRow | null> {
  const [row] = await tx<AppRow[]>`
    update agent_app set published_revision = ${p.revision}, version = version + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and app_id = ${p.appId} and version = ${p.expectedVersion}
      and status = 'active'
    returning ${columns(tx)}`;
  return row ?? null;
}

export async function setAppStatus(
  tx: TransactionSql,
  p: { tenantId: string; appId: string; status: AppStatus; expectedVersion: number },
): Promise<AppRow | null> {
  const [row] = await tx<AppRow[]>`
    update agent_app set status = ${p.status}, version = version + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and app_id = ${p.appId} and version = ${p.expectedVersion}
    returning ${columns(tx)}`;
  return row ?? null;
}

/** Read after the row lock taken by an UPDATE, so a concurrent default assignment is seen. */
export async function isTenantDefaultApp(
  tx: TransactionSql,
  tenantId: string,
  appId: string,
): Promise<boolean> {
  const rows =
    await tx`select 1 from tenant where tenant_id = ${tenantId} and default_agent_app_id = ${appId}`;
  return rows.length > 0;
}
