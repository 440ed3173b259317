import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

// Outbound calls go to URLs that tenants configure (model base_url, tool endpoints, receipt URLs,
// channel api_base_url). Under `public_only` a URL whose host is, or resolves to, a loopback,
// private, link-local or otherwise internal address is refused before any byte is sent, so a tenant
// cannot reach the worker's own network (the Temporal UI, metadata services, other tenants' data).
// The embedded default allows private addresses: its local sandboxes live on 127.0.0.1.

export type EgressPolicy = 'public_only' | 'allow_private';

export class EgressDeniedError extends Error {
  override name = 'EgressDeniedError';
}

const internal = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const) {
  internal.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  internal.addSubnet(net, prefix, 'ipv6');
}

let policy: EgressPolicy = 'allow_private';

/** Set once by the entry point (SWITCHYARD_EGRESS). */
export function setEgressPolicy(next: EgressPolicy): void {
  policy = next;
}

export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return internal.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    return mapped ? internal.check(mapped[1]!, 'ipv4') : internal.check(address, 'ipv6');
  }
  return true;
}

/** Throws EgressDeniedError when the policy forbids this URL; the message names no credential. */
export async function checkEgress(url: string): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EgressDeniedError('outbound URL is not valid');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new EgressDeniedError(`outbound protocol ${parsed.protocol} is not allowed`);
  }
  if (policy === 'allow_private') return;
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host)
    ? [host]
    : (await lookup(host, { all: true }).catch(() => [])).map((a) => a.address);
  if (addresses.length === 0) throw new EgressDeniedError(`outbound host ${host} does not resolve`);
  if (addresses.some(isInternalAddress)) {
    throw new EgressDeniedError(`outbound host ${host} is an internal address (egress policy public_only)`);
  }
}

/** fetch behind the egress policy. */
export const egressFetch: typeof fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  await checkEgress(url);
  return fetch(input, init);
};
