// Hash routes (`#/tenants/t_1/apps`): the server serves one page, and a reload keeps the place.
import { useEffect, useState } from './html.js';

export function currentRoute() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = hash.split('?');
  return {
    parts: path.split('/').filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(query),
  };
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
