import { context } from '@opentelemetry/api';
import type { Context, MiddlewareHandler } from 'hono';
import { authenticateApiKey } from '../../db/queries/admin/api-keys';
import { withTenantTx } from '../../db/tx';
import { safeEqual, sha256Hex } from '../../lib/digest';
import { addLogFields } from '../../lib/log-context';
import { decideTenantSampling, keepRequestSpan } from '../../telemetry/sampling';
import type { AppDeps } from '../deps';
import { ApiError } from '../errors';
import type { AdminEnv, Principal } from './env';

const BEARER = /^Bearer[ \t]+([\x21-\x7e]{1,512})$/i;
/**
 * The exact shape of a tenant API key as api-keys.ts mints it: `sy_` and base64url of 32 random
 * bytes, unpadded (43 characters; the last carries 4 bits, so its low 2 bits are zero).
 * Anything else that is not the platform token is refused before the database.
 */
export const API_KEY_SHAPE = /^sy_[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
/** The tenant segment of every tenant-scoped admin path. */
const TENANT_PATH = /^\/v1\/admin\/tenants\/([^/]+)/;
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

async function authenticate(
  deps: AppDeps,
  header: string | undefined,
): Promise<{ principal: Principal; samplingRate: number | null } | null> {
  const token = header ? BEARER.exec(header.trim())?.[1] : undefined;
  if (!token) return null;
  // The platform token is compared in memory (constant time); only a well-shaped tenant key is
  // worth a lookup, so malformed bearers cost no database statement.
  if (deps.adminToken.length > 0 && safeEqual(token, deps.adminToken)) {
    // No tenant of its own: its requests are kept (rare, worth it), and work it starts for a
    // tenant follows that tenant's rate (lib/workflow-start.ts).
    return { principal: { kind: 'platform' }, samplingRate: null };
  }
  if (!API_KEY_SHAPE.test(token)) return null;
  // Tenant keys are stored as digests only; the lookup runs before any tenant is known, so it is
  // a SECURITY DEFINER function rather than a read through RLS.
  const key = await withTenantTx(deps.sql, { role: 'tenant_admin_writer', tenantId: null }, (tx) =>
    authenticateApiKey(tx, sha256Hex(token)),
  );
  if (!key) return null;
  return {
    principal: { kind: 'api_key', tenantId: key.tenant_id, keyId: key.key_id, role: key.role },
    samplingRate: key.tenant_trace_sampling_rate,
  };
}

/**
 * Authenticates every /v1/admin request (its failures are limited per source address before it
 * runs: api/failure-limit.ts), then applies the two rules that hold for every route, in
 * this order: a tenant key addressing another tenant gets 404 (it must not learn that the tenant
 * exists, so this precedes any role or body check), and a viewer may not mutate (403).
 */
export function adminAuth(deps: AppDeps): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    const authenticated = await authenticate(deps, c.req.header('authorization'));
    if (!authenticated) throw new ApiError('unauthenticated', 'A valid bearer token is required.');
    const { principal } = authenticated;
    c.set('principal', principal);
    // The rest of the request (and any workflow it starts) is sampled by its tenant's rate.
    const sampling =
      authenticated.samplingRate === null
        ? keepRequestSpan()
        : decideTenantSampling(authenticated.samplingRate);
    if (principal.kind === 'api_key') {
      // A tenant key is its tenant: the request's log lines name it (lib/log-context.ts).
      addLogFields({ tenant_id: principal.tenantId });
      const addressed = TENANT_PATH.exec(c.req.path)?.[1];
      if (addressed !== undefined && addressed !== principal.tenantId) {
        throw new ApiError('not_found', 'No such tenant.');
      }
      if (principal.role === 'tenant_viewer' && !READ_METHODS.has(c.req.method)) {
        throw new ApiError('forbidden', 'The tenant_viewer role is read-only.');
      }
    }
    await context.with(sampling, next);
  };
}

/** Route middleware for the platform-only routes (create/list tenants, configuration, status). */
export const platformOnly: MiddlewareHandler<AdminEnv> = async (c, next) => {
  if (c.get('principal').kind !== 'platform') {
    throw new ApiError('forbidden', 'Only the platform token may do this.');
  }
  await next();
};

/**
 * The tenant a handler may act on: the path's tenant, re-checked against the principal here as
 * well so that a handler can never act on a tenant the middleware did not vet.
 */
export function scopedTenant(c: Context<AdminEnv>, tenantId: string): string {
  const p = c.get('principal');
  if (p.kind === 'api_key' && p.tenantId !== tenantId) throw new ApiError('not_found', 'No such tenant.');
  addLogFields({ tenant_id: tenantId });
  return tenantId;
}
