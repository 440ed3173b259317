import postgres, { type TransactionSql } from 'postgres';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type TenantStatus = 'active' | 'suspended' | 'disabled';

export interface TenantState {
  tenant_id: string;
  status: TenantStatus;
  version: number;
  billing_currency: string | null;
  default_agent_app_id: string | null;
  default_backend_profile_id: string | null;
}

/** The seeds' update_tenant_configuration parameters (the full snapshot, nullable ones nullable). */
export interface TenantConfiguration {
  display_name: string;
  rate_limit_rpm: number | null;
  max_concurrent_executions: number | null;
  monthly_token_budget: number | null;
  monthly_spend_limit_minor: number | null;
  billing_currency: string | null;
  audit_retention_days: number;
  /** Not a seeds parameter: the 14-argument update_tenant_configuration of migration 0040. */
  artifact_retention_days: number;
  log_masking_level: 'none' | 'basic' | 'strict';
  trace_sampling_rate: number;
  default_agent_app_id: string | null;
  default_backend_profile_id: string | null;
}

export interface TenantRow extends TenantConfiguration {
  tenant_id: string;
  tenant_key: string;
  status: TenantStatus;
  version: number;
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  tenant_id, tenant_key, display_name, status, rate_limit_rpm, max_concurrent_executions,
  monthly_token_budget, monthly_spend_limit_minor, billing_currency, audit_retention_days,
  artifact_retention_days, log_masking_level, trace_sampling_rate, default_agent_app_id, default_backend_profile_id,
  version, created_at, updated_at, ${sortTs(tx, 'created_at')} as sort_ts`;

export async function getTenantState(tx: TransactionSql, tenantId: string): Promise<TenantState | null> {
  const rows = await tx<TenantState[]>`
    select tenant_id, status, version, billing_currency, default_agent_app_id, default_backend_profile_id
    from tenant where tenant_id = ${tenantId}`;
  return rows[0] ?? null;
}

export async function getTenant(tx: TransactionSql, tenantId: string): Promise<TenantRow | null> {
  const rows = await tx<TenantRow[]>`select ${columns(tx)} from tenant where tenant_id = ${tenantId}`;
  return rows[0] ?? null;
}

export async function listTenants(tx: TransactionSql, p: PageParams): Promise<Page<TenantRow>> {
  const rows = await tx<TenantRow[]>`
    select ${columns(tx)} from tenant
    where true ${keysetAfter(tx, p.cursor, 'created_at', 'tenant_id')}
    order by created_at desc, tenant_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.tenant_id }));
}

export type NewTenant = Omit<TenantConfiguration, 'default_agent_app_id' | 'default_backend_profile_id'> & {
  tenant_id: string;
  tenant_key: string;
};

/** Tenant creation is a plain INSERT (granted to the admin writer); later changes go through functions. */
export async function insertTenant(tx: TransactionSql, t: NewTenant): Promise<TenantRow> {
  const [row] = await tx<TenantRow[]>`
    insert into tenant (tenant_id, tenant_key, display_name, rate_limit_rpm, max_concurrent_executions,
                        monthly_token_budget, monthly_spend_limit_minor, billing_currency,
                        audit_retention_days, artifact_retention_days, log_masking_level,
                        trace_sampling_rate)
    values (${t.tenant_id}, ${t.tenant_key}, ${t.display_name}, ${t.rate_limit_rpm},
            ${t.max_concurrent_executions}, ${t.monthly_token_budget}, ${t.monthly_spend_limit_minor},
            ${t.billing_currency}, ${t.audit_retention_days}, ${t.artifact_retention_days},
            ${t.log_masking_level}, ${t.trace_sampling_rate})
    returning ${columns(tx)}`;
  return row!;
}

/**
 * Runs a seed function in a savepoint. Its refusals are plain RAISE EXCEPTION (P0001) with
 * prose messages; rather than parse those, the caller re-reads the tenant in the same
 * transaction and classifies. Any other error (a CHECK, say) propagates unchanged.
 */
async function refusable<T>(tx: TransactionSql, fn: (sp: TransactionSql) => Promise<T>): Promise<T | null> {
  try {
    return (await tx.savepoint((sp) => fn(sp as unknown as TransactionSql))) as T;
  } catch (err) {
    if (err instanceof postgres.PostgresError && err.code === 'P0001') return null;
    throw err;
  }
}

/**
 * update_tenant_configuration (its 14-argument form: the seeds' snapshot plus
 * artifact_retention_days, one version bump); the new version, or null when the function refused.
 */
export function updateTenantConfiguration(
  tx: TransactionSql,
  p: { tenantId: string; expectedVersion: number; config: TenantConfiguration },
): Promise<number | null> {
  const c = p.config;
  return refusable(tx, async (sp) => {
    const [row] = await sp<{ version: number }[]>`
      select update_tenant_configuration(
        ${p.tenantId}, ${p.expectedVersion}, ${c.display_name}, ${c.rate_limit_rpm},
        ${c.max_concurrent_executions}, ${c.monthly_token_budget}, ${c.monthly_spend_limit_minor},
        ${c.billing_currency}, ${c.audit_retention_days}, ${c.log_masking_level},
        ${c.trace_sampling_rate}::real, ${c.default_agent_app_id}, ${c.default_backend_profile_id},
        ${c.artifact_retention_days}::int
      ) as version`;
    return Number(row!.version);
  });
}

/** transition_tenant_status (which also writes the status-change outbox row); false when refused. */
export async function transitionTenantStatus(
  tx: TransactionSql,
  p: {
    tenantId: string;
    expectedVersion: number;
    nextStatus: TenantStatus;
    actorType: string;
    actorId: string;
    reason: string;
    correlationId: string;
  },
): Promise<boolean> {
  const done = await refusable(tx, async (sp) => {
    await sp`select transition_tenant_status(${p.tenantId}, ${p.expectedVersion}, ${p.nextStatus},
                                             ${p.actorType}, ${p.actorId}, ${p.reason}, ${p.correlationId})`;
    return true;
  });
  return done ?? false;
}
