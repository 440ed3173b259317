// Hash routes (`#/tenants/t_1/apps`): the server serves one page, and a reload keeps the place.
import { useEffect, useState } from './html.js';

/**
 * What a route part may be: a section name or an id as the API mints them (`t_…`, `cb_…`, a
 * revision number, a secret name). A hash is anyone's link, so a part with anything else (a `/`
 * or `..` decoded from `%2F`, a malformed `%`) makes the whole route `invalid`: no page is shown
 * and nothing is requested for it.
 */
export const ROUTE_PART = /^[A-Za-z0-9_-]{1,200}$/;

function decodePart(raw) {
  try {
    const part = decodeURIComponent(raw);
    return ROUTE_PART.test(part) ? part : null;
  } catch {
    return null; // URIError: a malformed percent-encoding
  }
}

/** `{ parts, query, invalid }`; an invalid route has no parts. */
export function currentRoute() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = hash.split('?');
  const parts = path.split('/').filter(Boolean).map(decodePart);
  let params;
  try {
    params = new URLSearchParams(query);
  } catch {
    params = new URLSearchParams();
  }
  if (parts.includes(null)) return { parts: [], query: params, invalid: true };
  return { parts, query: params, invalid: false };
}

export function useRoute() {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const on = () => setRoute(currentRoute());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

export function go(hash) {
  location.hash = hash;
}

/** `#/tenants/<t><rest>` */
export const tenantHref = (tenantId, rest = '') => `#/tenants/${encodeURIComponent(tenantId)}${rest}`;
