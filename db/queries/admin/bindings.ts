import type { TransactionSql } from 'postgres';
import { capabilitiesOf } from '../../../channels/capabilities';
import type { Channel } from '../../../workflows/shared';
import { jsonb } from '../../json';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type BindingStatus = 'draft' | 'active' | 'suspended' | 'disabled';
export type BindingChannel = Channel;

/** Everything but the route-key digest, which only ingress needs. */
export interface BindingRow {
  binding_id: string;
  channel: BindingChannel;
  provider_account_id: string;
  app_id: string;
  /** null exactly for a console binding (it has no provider to authenticate) */
  secret_ref: string | null;
  config: Record<string, unknown>;
  config_digest: string;
  status: BindingStatus;
  version: number;
  /** what the channel's protocol supports (channels/capabilities.ts), recorded at creation */
  capability_version: number;
  capabilities: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  binding_id, channel, provider_account_id, app_id, secret_ref, config, config_digest, status, version,
  capability_version, capabilities, created_at, updated_at, ${sortTs(tx, 'created_at')} as sort_ts`;

export async function insertBinding(
  tx: TransactionSql,
  p: {
    tenantId: string;
    bindingId: string;
    channel: BindingChannel;
    providerAccountId: string;
    routeKeyDigest: string;
    appId: string;
    secretRef: string | null;
    config: Record<string, unknown>;
    configDigest: string;
    status: BindingStatus;
  },
): Promise<BindingRow> {
  const caps = capabilitiesOf(p.channel);
  const [row] = await tx<BindingRow[]>`
    insert into channel_binding (tenant_id, binding_id, channel, provider_account_id, public_route_key_digest,
                                 app_id, secret_ref, config, config_digest, status, capability_version,
                                 capabilities)
    values (${p.tenantId}, ${p.bindingId}, ${p.channel}, ${p.providerAccountId}, ${p.routeKeyDigest},
            ${p.appId}, ${p.secretRef}, ${jsonb(tx, p.config)}, ${p.configDigest}, ${p.status},
            ${caps.version}, ${jsonb(tx, caps.capabilities)})
    returning ${columns(tx)}`;
  return row!;
}

export async function getBinding(
  tx: TransactionSql,
  tenantId: string,
  bindingId: string,
): Promise<BindingRow | null> {
  const rows = await tx<BindingRow[]>`
    select ${columns(tx)} from channel_binding where tenant_id = ${tenantId} and binding_id = ${bindingId}`;
  return rows[0] ?? null;
}

export async function listBindings(
  tx: TransactionSql,
  p: { tenantId: string } & PageParams,
): Promise<Page<BindingRow>> {
  const rows = await tx<BindingRow[]>`
    select ${columns(tx)} from channel_binding
    where tenant_id = ${p.tenantId} ${keysetAfter(tx, p.cursor, 'created_at', 'binding_id')}
    order by created_at desc, binding_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.binding_id }));
}

/** Compare-and-set on version and previous status; null when it did not apply. */
export async function setBindingStatus(
  tx: TransactionSql,
  p: {
    tenantId: string;
    bindingId: string;
    from: BindingStatus;
    status: BindingStatus;
    expectedVersion: number;
  },
): Promise<BindingRow | null> {
  const [row] = await tx<BindingRow[]>`
    update channel_binding set status = ${p.status}, version = version + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and binding_id = ${p.bindingId}
      and version = ${p.expectedVersion} and status = ${p.from}
    returning ${columns(tx)}`;
  return row ?? null;
}

/** This tenant's active binding for the account, other than `exceptBindingId`; null when none. */
export async function findTenantActiveBinding(
  tx: TransactionSql,
  p: { tenantId: string; channel: BindingChannel; providerAccountId: string; exceptBindingId: string | null },
): Promise<string | null> {
  const rows = await tx<{ binding_id: string }[]>`
    select binding_id from channel_binding
    where tenant_id = ${p.tenantId} and channel = ${p.channel} and provider_account_id = ${p.providerAccountId}
      and status = 'active' and binding_id is distinct from ${p.exceptBindingId}`;
  return rows[0]?.binding_id ?? null;
}
