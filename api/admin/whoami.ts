import { z } from '@hono/zod-openapi';
import type { AdminApp } from './env';
import { adminRoute } from './route';
import { jsonResponse } from './schemas';

// Who the bearer is, as the admin middleware authenticated it (api/admin/auth.ts): the console's
// sign-in asks this instead of probing other routes, so a tenant key signs in with the key alone.

const Whoami = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('platform') }),
    z.object({
      kind: z.literal('api_key'),
      tenant_id: z.string(),
      key_id: z.string(),
      role: z.enum(['tenant_admin', 'tenant_viewer']),
    }),
  ])
  .openapi('Whoami', {
    description: 'The platform token, or a tenant API key with its tenant and role',
  });

const route = adminRoute({
  method: 'get',
  path: '/v1/admin/whoami',
  tags: ['auth'],
  summary: 'The principal of the bearer token (any valid token)',
  responses: { 200: jsonResponse(Whoami, 'The authenticated principal') },
});

export function registerWhoamiRoutes(admin: AdminApp): void {
  admin.openapi(route, (c) => {
    const p = c.get('principal');
    switch (p.kind) {
      case 'platform':
        return c.json({ kind: 'platform' as const }, 200);
      case 'api_key':
        return c.json(
          { kind: 'api_key' as const, tenant_id: p.tenantId, key_id: p.keyId, role: p.role },
          200,
        );
      default: {
        const exhaustive: never = p;
        return exhaustive;
      }
    }
  });
}
