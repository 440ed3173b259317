import { isIP } from 'node:net';
import type { MiddlewareHandler } from 'hono';
import { newUlid } from '../lib/ulid';

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * The caller's own `x-request-id`, if it was printable ASCII of at most 128 characters: a
     * correlation field only (logs, audit `details.client_request_id`), never our request id.
     */
    clientRequestId: string | undefined;
    /**
     * The limiter's key for the caller: the socket's address (or, with trusted proxy hops, the
     * X-Forwarded-For entry our own proxy wrote), IPv6 reduced to its /64. `null` when the request
     * came with no connection at all (app.request in tests and benchmarks).
     */
    sourceAddress: string | null;
  }
}

const CLIENT_REQUEST_ID = /^[\x20-\x7e]{1,128}$/;

/**
 * First middleware of the app: our own request id (`req_<ULID>`, always generated here, in the
 * `x-request-id` response header, logs, security events and audit rows), the client's id kept
 * aside, and the source address.
 */
export function requestMeta(opts: { trustedProxyHops: number }): MiddlewareHandler {
  return async (c, next) => {
    const requestId = `req_${newUlid()}`;
    c.set('requestId', requestId);
    const client = c.req.header('x-request-id');
    c.set('clientRequestId', client !== undefined && CLIENT_REQUEST_ID.test(client) ? client : undefined);
    c.set('sourceAddress', sourceAddressOf(c.env, c.req.header('x-forwarded-for'), opts.trustedProxyHops));
    c.header('x-request-id', requestId);
    await next();
  };
}

/** The socket's remote address as @hono/node-server passes it (`c.env.incoming.socket`). */
function socketAddress(env: unknown): string | null | undefined {
  const bindings = env as
    | { incoming?: { socket?: { remoteAddress?: string } }; server?: { incoming?: unknown } }
    | undefined;
  const incoming = (bindings?.server ?? bindings)?.incoming as
    | { socket?: { remoteAddress?: string } }
    | undefined;
  if (!incoming) return undefined;
  return incoming.socket?.remoteAddress ?? null;
}

/**
 * Who is calling, for the failure limiter. X-Forwarded-For is believed only for `trustedHops`
 * proxies of our own: the address is the entry that many places from the right, counting the
 * socket as the last (entries further left are whatever the client wrote). Without hops it is
 * ignored. A connection without a readable address is one shared key, `unknown`; no connection at
 * all (an in-process request) is `null`.
 */
export function sourceAddressOf(
  env: unknown,
  forwardedFor: string | undefined,
  trustedHops: number,
): string | null {
  const socket = socketAddress(env);
  if (socket === undefined) return null;
  let address = socket;
  if (trustedHops > 0 && socket !== null && forwardedFor !== undefined) {
    const chain = [...forwardedFor.split(',').map((s) => s.trim()), socket];
    const picked = chain[Math.max(0, chain.length - 1 - trustedHops)];
    if (picked !== undefined && isIP(stripZone(picked)) !== 0) address = picked;
  }
  return address === null ? 'unknown' : limiterAddress(address);
}

function stripZone(address: string): string {
  const pct = address.indexOf('%');
  return pct === -1 ? address : address.slice(0, pct);
}

/**
 * IPv4 as is (also when IPv4-mapped); IPv6 as its /64, since one host is routinely given a whole
 * /64 and could otherwise rotate through addresses faster than any limiter forgets them.
 */
export function limiterAddress(raw: string): string {
  const address = stripZone(raw).toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return mapped[1]!;
  if (isIP(address) !== 6) return address;
  // An embedded dotted IPv4 tail is the last two groups.
  const hex = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) =>
    [Number(a) * 256 + Number(b), Number(c) * 256 + Number(d)].map((n) => n.toString(16)).join(':'),
  );
  const [head = '', tail] = hex.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
