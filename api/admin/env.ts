import type { OpenAPIHono } from '@hono/zod-openapi';

/** Who is calling: the platform token, or one tenant-scoped API key with its role. */
export type Principal =
  | { kind: 'platform' }
  | { kind: 'api_key'; tenantId: string; keyId: string; role: 'tenant_admin' | 'tenant_viewer' };

/** The admin sub-app's context: the app's request id plus the authenticated principal. */
export type AdminEnv = { Variables: { requestId: string; principal: Principal } };

export type AdminApp = OpenAPIHono<AdminEnv>;

/** The audit actor for a principal: `platform/platform` or `api_key/<key_id>`. */
export function actorOf(p: Principal): { actorType: 'platform' | 'api_key'; actorId: string } {
  return p.kind === 'platform'
    ? { actorType: 'platform', actorId: 'platform' }
    : { actorType: 'api_key', actorId: p.keyId };
}
