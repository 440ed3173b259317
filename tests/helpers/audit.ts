import type { Sql } from 'postgres';
import { enqueueAudit } from '../../db/queries/audit';
import { sealAudit } from '../../db/queries/audit-seal';
import { withTenantTx } from '../../db/tx';

/**
 * Seals the tenant's pending audit entries now (what the worker's sealer does in the background,
 * runtime/audit-sealer.ts), so a test reading audit_log right after a message finished sees the
 * runtime's entries. Waits for a sealer holding the chain; throws if an entry was refused.
 */
export async function sealNow(sql: Sql, tenantId: string): Promise<void> {
  const r = await sealAudit(sql, tenantId, { role: 'tenant_app_writer', wait: true });
  if (r.refused) throw new Error(`audit sealing refused ${r.refused} for ${tenantId}`);
}

/** Queues one runtime audit entry of `action` for the tenant (as the worker does, to be sealed later). */
export function enqueueWorkerAudit(sql: Sql, tenantId: string, action: string) {
  return withTenantTx(sql, { role: 'tenant_app_writer', tenantId }, (tx) =>
    enqueueAudit(tx, { tenantId, action, actorType: 'worker', actorId: 'w/1' }),
  );
}

/**
 * A fault in sealing that is not a refusal: linking the tenant's entries (only those of `action`,
 * if given) into audit_log raises `message` until the returned function removes the trigger. Scoped
 * to the tenant because test files share the database; `name` must be unique to the file.
 */
export async function failAuditLinking(
  sql: Sql,
  p: { name: string; tenantId: string; action?: string; message: string },
): Promise<() => Promise<void>> {
  const when = `new.tenant_id = '${p.tenantId}'${p.action ? ` and new.action = '${p.action}'` : ''}`;
  await sql.unsafe(`
    create or replace function public.${p.name}() returns trigger language plpgsql as $$
    begin raise exception '${p.message}'; end $$`);
  await sql.unsafe(`
    create trigger ${p.name} before insert on public.audit_log for each row
    when (${when}) execute function public.${p.name}()`);
  return async () => {
    await sql.unsafe(`drop trigger if exists ${p.name} on public.audit_log`);
    await sql.unsafe(`drop function if exists public.${p.name}()`);
  };
}
