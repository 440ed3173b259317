import type { MiddlewareHandler } from 'hono';
import type { ConfigRegistry } from '../registry/cache';

/**
 * The admin paths (after /v1/admin/tenants/{tenant_id}) whose mutations change what the registry
 * caches (registry/cache.ts: a binding candidate — the binding, its tenant's runtime gates and the
 * sealed binding secret): the tenant's configuration and status, bindings and their status, and
 * secrets. The same kinds registry/cache.ts `apply` acts on; apps, revisions and profiles are not
 * read at ingress (it ignores their events too), and console messages, message actions, dead
 * letters, tool decisions and API keys change no configuration.
 */
const CACHED_PATHS: readonly RegExp[] = [
  /^$/,
  /^\/(configuration|status-transitions)$/,
  /^\/bindings(\/[^/]+(\/status-transitions)?)?$/,
  /^\/secrets(\/[^/]+)?$/,
];

const TENANT_PREFIX = /^\/v1\/admin\/tenants\/[^/]+/;

/** Whether a successful mutation of `path` may have changed a registry entry of its tenant. */
export function changesRegistry(path: string): boolean {
  const rest = path.replace(TENANT_PREFIX, '').replace(/\/$/, '');
  return CACHED_PATHS.some((re) => re.test(rest));
}

/**
 * After an admin mutation of what the registry caches succeeds (changesRegistry), the process that
 * made it drops the tenant's registry entries at once, so its own next webhook reads the change
 * (read-your-writes). Every other process learns of it from the version event
 * (registry/listener.ts); this only closes the gap between commit and that notification here.
 * Over-invalidating would be harmless (an entry is re-read once) but not free: a console chat
 * POST, say, would empty the tenant's cache on every message.
 */
export function invalidateTenantOnWrite(registry: ConfigRegistry): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.res.status >= 400) return;
    const tenantId = c.req.param('tenant_id');
    if (tenantId && changesRegistry(c.req.path)) registry.invalidateTenant(tenantId);
  };
}
