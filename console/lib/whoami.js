// Who a token is, from the admin API itself (GET /v1/admin/whoami): the platform token, or a
// tenant key with its tenant and role. A tenant key names its tenant, so it signs in alone.
import { failureOf, request } from './api.js';

export async function signIn(token) {
  token = token.trim();
  const r = await request(token, 'GET', '/v1/admin/whoami');
  if (r.status !== 200) throw failureOf(r.status, r.json, r.text);
  if (r.json?.kind === 'platform') return { token, kind: 'platform' };
  if (r.json?.kind === 'api_key')
    return { token, kind: 'tenant', tenantId: r.json.tenant_id, keyId: r.json.key_id, role: r.json.role };
  throw failureOf(500, null, `unexpected whoami answer: ${r.text}`);
}
