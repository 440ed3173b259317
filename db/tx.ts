import { sql as dsql } from 'drizzle-orm';
import type { PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import type { Sql, TransactionSql } from 'postgres';

export type { TransactionSql };

/** The runtime roles of the seeds (created in migration 0001). */
export type DbRole = 'tenant_admin_writer' | 'tenant_app_writer';

/**
 * Closed mapping from the union to the role name sent to PostgreSQL: even a value smuggled past the
 * type system (`as DbRole`) cannot name any other role.
 */
const ROLE_NAMES: Readonly<Record<DbRole, string>> = {
  tenant_admin_writer: 'tenant_admin_writer',
  tenant_app_writer: 'tenant_app_writer',
};

export interface TenantTxOptions {
  role: DbRole;
  /** The trusted tenant; null for the platform-level path, where RLS hides every tenant-owned row. */
  tenantId: string | null;
  /** One snapshot for every statement (a read that must see a consistent state, e.g. a chain walk). */
  isolation?: 'repeatable read';
}

function roleName(role: DbRole): string {
  const name = Object.hasOwn(ROLE_NAMES, role) ? ROLE_NAMES[role] : undefined;
  if (name === undefined) throw new Error(`unknown database role: ${String(role)}`);
  return name;
}

/**
 * Runs `fn` in one transaction as `role` with `app.tenant_id` set, both transaction-local.
 *
 * One statement does both: `set_config('role', …, true)` is exactly `SET LOCAL ROLE` (the same
 * GUC with the same membership check; PostgREST switches roles this way) but accepts the role as a
 * bound parameter, so neither value is ever spliced into SQL text, and it costs one round trip.
 * An empty tenant matches no row (RLS compares `tenant_id = current_setting('app.tenant_id')`).
 */
export async function withTenantTx<T, TTypes extends Record<string, unknown>>(
  sql: Sql<TTypes>,
  opts: TenantTxOptions,
  fn: (tx: TransactionSql<TTypes>) => Promise<T>,
): Promise<T> {
  const role = roleName(opts.role);
  const body = async (tx: TransactionSql<TTypes>) => {
    // Not awaited before fn runs: postgres.js pipelines fn's first statement behind this one on the
    // same connection, and statements run in order, so it still executes under the role and
    // tenant — one round trip saved per transaction. A failure here aborts the transaction.
    // execute() queues it now: a postgres.js query is only queued when first awaited, and fn(tx)
    // runs (and awaits its own first statement) before Promise.all would await this one.
    const scoped =
      tx`select set_config('role', ${role}, true), set_config('app.tenant_id', ${opts.tenantId ?? ''}, true)`.execute();
    const [, value] = await Promise.all([scoped, fn(tx)]);
    return value;
  };
  const result = opts.isolation
    ? await sql.begin('isolation level repeatable read read only', body)
    : await sql.begin(body);
  return result as T;
}

/**
 * Switches the tenant inside an open transaction, for the one flow that learns its tenant midway:
 * creating a tenant (INSERT into tenant, then its first audit entry under that tenant).
 */
export async function setTxTenant<TTypes extends Record<string, unknown>>(
  tx: TransactionSql<TTypes>,
  tenantId: string | null,
): Promise<void> {
  await tx`select set_config('app.tenant_id', ${tenantId ?? ''}, true)`;
}

/** The transaction handle `db.transaction` gives for a Drizzle postgres-js database. */
export type TenantDbTx<TSchema extends Record<string, unknown>> = Parameters<
  Parameters<PostgresJsDatabase<TSchema>['transaction']>[0]
>[0];

/** Drizzle-flavoured withTenantTx: same role and tenant, set the same way, inside `db.transaction`. */
export async function withTenantDb<T, TSchema extends Record<string, unknown>>(
  db: PostgresJsDatabase<TSchema>,
  opts: TenantTxOptions,
  fn: (tx: TenantDbTx<TSchema>) => Promise<T>,
): Promise<T> {
  const role = roleName(opts.role);
  return db.transaction(async (tx) => {
    await tx.execute(
      dsql`select set_config('role', ${role}, true), set_config('app.tenant_id', ${opts.tenantId ?? ''}, true)`,
    );
    return fn(tx);
  });
}
