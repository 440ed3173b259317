import type { Context } from 'hono';
import {
  type BindingRow,
  findTenantActiveBinding,
  getBinding,
  setBindingStatus,
} from '../../db/queries/admin/bindings';
import { setTxTenant, type TransactionSql } from '../../db/tx';
import { ApiError } from '../errors';
import { type ActivationTarget, ownershipNotProven } from './binding-checks';
import { audit } from './context';
import type { AdminEnv } from './env';
import { fieldError } from './errors';

// The writing side of a binding activation (bindings.ts runs the checks and the proof of
// ownership first): who else serves the account, what a tenant is told about it, and the
// platform's arbitration.

/**
 * Runs the writing transaction of an activation. The unique index on active accounts is the last
 * word on "another binding serves this account"; when it fires the other binding is in another
 * tenant (this tenant's are checked first and named), and that must not be revealed to a tenant:
 * its key gets the refusal an unproven ownership gets. The platform token, which may arbitrate
 * (displace_binding), is told.
 */
export async function activationWrite<T>(c: Context<AdminEnv>, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    const details =
      err instanceof ApiError ? (err.details as { constraint?: string } | undefined) : undefined;
    if (
      details?.constraint === 'channel_binding_active_account_unique' &&
      c.get('principal').kind !== 'platform'
    ) {
      throw ownershipNotProven('account_mismatch');
    }
    throw err;
  }
}

/** 409 naming this tenant's other active binding for the account. */
export async function refuseTenantDuplicate(
  tx: TransactionSql,
  tenantId: string,
  b: ActivationTarget,
  bindingId: string | null,
): Promise<void> {
  const other = await findTenantActiveBinding(tx, {
    tenantId,
    channel: b.channel,
    providerAccountId: b.provider_account_id,
    exceptBindingId: bindingId,
  });
  if (other) {
    throw new ApiError(
      'conflict',
      'Another active binding of this tenant already serves this provider account.',
      {
        binding_id: other,
      },
    );
  }
}

/**
 * Platform arbitration: suspends `target`, an active binding of the same channel account as `b`
 * in any tenant, in the caller's transaction (switching its tenant there and back), audited in
 * that binding's tenant with the platform's reason. 400 unless it is such a binding.
 */
export async function displaceBinding(
  c: Context<AdminEnv>,
  tx: TransactionSql,
  tenantId: string,
  b: BindingRow,
  target: { tenant_id: string; binding_id: string },
  reason: string,
): Promise<void> {
  await setTxTenant(tx, target.tenant_id);
  const other = await getBinding(tx, target.tenant_id, target.binding_id);
  if (
    other?.status !== 'active' ||
    other.channel !== b.channel ||
    other.provider_account_id !== b.provider_account_id
  ) {
    throw fieldError('displace_binding', 'must name an active binding of the same channel account');
  }
  const suspended = await setBindingStatus(tx, {
    tenantId: target.tenant_id,
    bindingId: other.binding_id,
    from: 'active',
    status: 'suspended',
    expectedVersion: other.version,
  });
  if (!suspended) throw new ApiError('optimistic_conflict', 'The displaced binding has changed; retry.');
  await audit(c, tx, target.tenant_id, {
    action: 'binding.suspend',
    bindingId: other.binding_id,
    channel: other.channel,
    reason,
    beforeVersion: other.version,
    afterVersion: suspended.version,
    details: {
      binding_id: other.binding_id,
      previous_status: 'active',
      next_status: 'suspended',
      displaced_by_arbitration: true,
    },
  });
  await setTxTenant(tx, tenantId);
}
