// The signed-in principal lives in this tab's sessionStorage only: closing the tab forgets the
// token. Nothing is stored in localStorage or cookies.
const KEY = 'switchyard.console.session';

/** `{ token, kind: 'platform' }` or `{ token, kind: 'tenant', tenantId, keyId, role }` (from GET /v1/admin/whoami), or null. */
export function loadSession() {
  try {
    const raw = sessionStorage.getItem(KEY);
    return raw ? JSON.parse(raw) : null;
  } catch {
    return null;
  }
}

export function saveSession(session) {
  sessionStorage.setItem(KEY, JSON.stringify(session));
}

export function clearSession() {
  sessionStorage.removeItem(KEY);
}

export const isPlatform = (s) => s?.kind === 'platform';

/** Whether the principal may mutate inside a tenant: the platform or a tenant_admin key. */
export const canWrite = (s) => s?.kind === 'platform' || s?.role === 'tenant_admin';
