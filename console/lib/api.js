// Every call goes through the admin API with the signed-in token as the bearer: the console has
// no authority of its own. A 401 ends the session (an expired or revoked key) and returns to
// sign-in; every other error keeps the API's envelope `{ error: { code, message, request_id,
// details? } }` for the page to show.
import { clearSession, loadSession } from './session.js';

export class ApiFailure extends Error {
  constructor(status, error) {
    super(error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = error?.code ?? `http_${status}`;
    this.requestId = error?.request_id;
    this.details = error?.details;
  }
}

const signedOut = new Set();

/** `fn(notice)` runs when the API refuses the session's token. Returns the unsubscribe. */
export function onSignedOut(fn) {
  signedOut.add(fn);
  return () => signedOut.delete(fn);
}

/** One request with an explicit token; never ends the session (sign-in uses it to probe). */
export async function request(token, method, path, body) {
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.status, json, text };
}

export function failureOf(status, json, text) {
  return new ApiFailure(status, json?.error ?? { code: `http_${status}`, message: text.slice(0, 300) });
}

/** A call as the signed-in principal: the parsed body, or throws an ApiFailure. */
export async function call(method, path, body) {
  const session = loadSession();
  if (!session) throw new ApiFailure(401, { code: 'unauthenticated', message: 'Not signed in.' });
  const { status, json, text } = await request(session.token, method, path, body);
  if (status === 401) {
    clearSession();
    for (const fn of signedOut) fn('The API refused your key (expired or revoked). Sign in again.');
  }
  if (status >= 400) throw failureOf(status, json, text);
  return json;
}

/**
 * The one place an admin API path is built: each segment (a fixed word or an id, whatever came
 * from the hash or a form) is percent-encoded on its own, so none can add a `/`, a `?` or a `#`.
 * `.` and `..` pass encodeURIComponent unchanged and a URL resolves them (also as `%2e`), so a
 * segment that is one, or empty, is refused: a crafted link can never reach another path.
 */
export function apiPath(...segments) {
  return `/v1/admin/${segments.map(segment).join('/')}`;
}

function segment(value) {
  const s = String(value ?? '');
  if (s === '' || s === '.' || s === '..') {
    throw new ApiFailure(400, { code: 'validation_failed', message: `Not a path segment: "${s}"` });
  }
  return encodeURIComponent(s);
}

/** `/v1/admin/tenants/<t>/<segment>/…`; append a query with qs(). */
export const tenantPath = (tenantId, ...segments) => apiPath('tenants', tenantId, ...segments);

/** `?a=1&b=2` from the defined, non-empty values of `params` ('' when none). */
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : '';
}
