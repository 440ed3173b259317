import type { Context } from 'hono';
import type { TransactionSql } from 'postgres';
import { getTenantState, type TenantState } from '../../db/queries/admin/tenants';
import type { AuditEntry } from '../../db/queries/audit';
import { appendAudit } from '../../db/queries/audit';
import { withTenantTx } from '../../db/tx';
import { activeTraceId } from '../../telemetry/trace-id';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import { type AdminEnv, actorOf } from './env';
import { mapDbError } from './errors';

/**
 * One admin unit of work: a single transaction as tenant_admin_writer with the trusted tenant
 * set (RLS is the backstop behind every explicit tenant predicate). Whatever fails rolls the
 * whole request back, audit entry included; expected PostgreSQL errors become API errors.
 */
export async function adminTx<T>(
  deps: AppDeps,
  tenantId: string | null,
  fn: (tx: TransactionSql) => Promise<T>,
  opts: { isolation?: 'repeatable read' } = {},
): Promise<T> {
  try {
    return await withTenantTx(deps.sql, { role: 'tenant_admin_writer', tenantId, ...opts }, fn);
  } catch (err) {
    throw mapDbError(err);
  }
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
