import type { MiddlewareHandler } from 'hono';
import type { ConfigRegistry } from '../registry/cache';

/**
 * After an admin mutation of a tenant (any non-GET under /v1/admin/tenants/{tenant_id}) succeeds,
 * the process that made it drops the tenant's registry entries at once, so its own next webhook
 * reads the change (read-your-writes). Every other process learns of it from the version event
 * (registry/listener.ts); this only closes the gap between commit and that notification here.
 * Over-invalidating is harmless: an entry is re-read once.
 */
export function invalidateTenantOnWrite(registry: ConfigRegistry): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.res.status >= 400) return;
    const tenantId = c.req.param('tenant_id');
    if (tenantId) registry.invalidateTenant(tenantId);
  };
}
