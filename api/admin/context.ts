import type { Context } from 'hono';
import type { TransactionSql } from 'postgres';
import { getTenantState, type TenantState } from '../../db/queries/admin/tenants';
import type { AuditEntry } from '../../db/queries/audit';
import { appendAudit } from '../../db/queries/audit';
import { withTenantTx } from '../../db/tx';
import { activeTraceId } from '../../telemetry/trace-id';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { scopedTenant } from './auth';
import { type AdminEnv, actorOf } from './env';
import { mapDbError } from './errors';

type TxOptions = { isolation?: 'repeatable read' };

/**
 * One admin unit of work: a single transaction as tenant_admin_writer with the trusted tenant
 * set (RLS is the backstop behind every explicit tenant predicate). Whatever fails rolls the
 * whole request back, audit entry included; expected PostgreSQL errors become API errors.
 */
export async function adminTx<T>(
  deps: AppDeps,
  tenantId: string | null,
  fn: (tx: TransactionSql) => Promise<T>,
  opts: TxOptions = {},
): Promise<T> {
  try {
    return await withTenantTx(deps.sql, { role: 'tenant_admin_writer', tenantId, ...opts }, fn);
  } catch (err) {
    throw mapDbError(err);
  }
}

/**
 * What tenantTx needs of a handler's context: a route with the `tenant_id` path parameter. Any other
 * route's context makes this `never`, so calling tenantTx there does not compile.
 */
type TenantParam<C> =
  C extends Context<AdminEnv, infer _P, infer I>
    ? I extends { out: { param: { tenant_id: string } } }
      ? { req: { valid(target: 'param'): { tenant_id: string } } }
      : never
    : never;

/**
 * The admin unit of work of a route that addresses a tenant: its `tenant_id`, vetted against the
 * principal (scopedTenant), then adminTx in that tenant; `fn` gets the tenant id.
 *
 * The tenant is vetted when this is called. A handler that may refuse the request before its
 * transaction (a cursor, a body rule) or runs more than one transaction calls scopedTenant first
 * and adminTx itself, so that every refusal comes after the vetting, as the request's log line
 * (which names the tenant from then on) shows.
 */
export function tenantTx<C extends Context<AdminEnv>, T>(
  c: C & TenantParam<C>,
  deps: AppDeps,
  fn: (tx: TransactionSql, tenantId: string) => Promise<T>,
  opts?: TxOptions,
): Promise<T> {
  const tenantId = scopedTenant(c, c.req.valid('param').tenant_id);
  return adminTx(deps, tenantId, (tx) => fn(tx, tenantId), opts);
}

/** The addressed tenant, or 404 (also for a platform caller naming an unknown tenant). */
export async function requireTenant(tx: TransactionSql, tenantId: string): Promise<TenantState> {
  const t = await getTenantState(tx, tenantId);
  if (!t) throw new ApiError('not_found', 'No such tenant.');
  return t;
}

/** Mutations of a disabled tenant's objects are refused: disabled is terminal (seeds). */
export async function requireWritableTenant(tx: TransactionSql, tenantId: string): Promise<TenantState> {
  const t = await requireTenant(tx, tenantId);
  if (t.status === 'disabled') throw new ApiError('tenant_disabled', 'The tenant is disabled.');
  return t;
}

type AuditFields = Omit<AuditEntry, 'tenantId' | 'actorType' | 'actorId' | 'requestId' | 'traceId'>;

/**
 * Appends the request's audit entry (actor, request and trace ids filled in) in `tx`. The request
 * id is always ours (api/request-meta.ts); a caller's own x-request-id goes only into
 * `details.client_request_id`.
 */
export function audit(c: Context<AdminEnv>, tx: TransactionSql, tenantId: string, entry: AuditFields) {
  return appendAudit(tx, auditEntryOf(c, tenantId, entry));
}

/** The request's audit entry as `audit` appends it, for a function that links it itself. */
export function auditEntryOf(c: Context<AdminEnv>, tenantId: string, entry: AuditFields): AuditEntry {
  const clientRequestId = c.get('clientRequestId');
  return {
    ...entry,
    ...(clientRequestId === undefined
      ? {}
      : { details: { ...entry.details, client_request_id: clientRequestId } }),
    ...actorOf(c.get('principal')),
    tenantId,
    requestId: c.get('requestId'),
    // The admin request's span (api/admin/tracing.ts); null when tracing is off.
    traceId: activeTraceId(),
  };
}
