// Who a token is, learnt from the admin API itself (it has no "whoami" route):
// - the platform token may list tenants (GET /v1/admin/tenants → 200);
// - a tenant key sees its own tenant (GET /tenants/{id} → 200; another tenant's → the API's 404);
// - its role: a tenant_viewer is refused every mutation before the body is read (403), while a
//   tenant_admin's empty body fails validation (400). The probe (POST …/api-keys with `{}`) can
//   never create anything: `role` is required, so it is refused before any handler runs.
import { ApiFailure, failureOf, request, tenantPath } from './api.js';

export const TENANT_KEY = /^sy_[A-Za-z0-9_-]{43}$/;

export async function signIn(token, tenantId) {
  token = token.trim();
  if (!TENANT_KEY.test(token)) {
    const r = await request(token, 'GET', '/v1/admin/tenants?limit=1');
    if (r.status === 200) return { token, kind: 'platform' };
    throw failureOf(r.status, r.json, r.text);
  }
  tenantId = (tenantId ?? '').trim();
  if (!tenantId) {
    throw new ApiFailure(400, {
      code: 'validation_failed',
      message: 'A tenant API key needs its tenant id (t_…): the key alone does not name it.',
    });
  }
  const t = await request(token, 'GET', tenantPath(tenantId));
  if (t.status !== 200) throw failureOf(t.status, t.json, t.text);
  const probe = await request(token, 'POST', tenantPath(tenantId, '/api-keys'), {});
  if (probe.status === 403) return { token, kind: 'tenant', tenantId, role: 'tenant_viewer' };
  if (probe.status === 400) return { token, kind: 'tenant', tenantId, role: 'tenant_admin' };
  throw failureOf(probe.status, probe.json, probe.text);
}
