import { AsyncLocalStorage } from 'node:async_hooks';
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import {
  Agent,
  DecoratorHandler,
  Dispatcher,
  type RequestInit as UndiciRequestInit,
  fetch as undiciFetch,
} from 'undici';

// Outbound calls go to URLs that tenants configure (model base_url, tool endpoints, receipt URLs,
// channel api_base_url), and all of them go through `egressFetch`: undici's fetch over one Agent
// whose connect-time lookup resolves the host and applies the policy to the addresses the socket
// then connects to — the checked address is the connected one, with no second resolution. Under
// `public_only` a host that is, or resolves to, a loopback, private, link-local or otherwise
// internal address is refused before any byte is sent, so a tenant cannot reach the worker's own
// network (the Temporal UI, metadata services, other tenants' data). The embedded default allows
// private addresses: its local sandboxes live on 127.0.0.1.
//
// Every hop is this one: a literal IP host is checked before connecting (the WHATWG URL parser has
// already turned 2130706433, 0177.0.0.1, 0x7f.1 and 127.1 into 127.0.0.1, and [::ffff:127.0.0.1]
// into [::ffff:7f00:1]); a name is checked at connect time, on every new connection; redirects are
// not followed (fetch runs with redirect: 'manual', the Agent's own redirect interceptor is off);
// no proxy is used (the Agent is ours, so HTTP(S)_PROXY and a global dispatcher are never
// consulted: a proxy would be the checked address while the target went unchecked); and a policy
// or resolver change starts a new pool, so no keep-alive socket opened under the old settings
// serves a call made under the new ones.
//
// Every response body is read with a cap the caller names (`maxResponseBytes`, 1 MiB when it names
// none), counted on the decoded bytes (a gzip bomb counts what it inflates to); past it the body errors and the
// connection is destroyed, never drained.
//
// Four ways a call fails here, each a class of its own for the callers:
// - EgressDeniedError: refused by the policy; permanent, nothing was sent.
// - EgressUnavailableError: the host did not resolve or the connection was not made (DNS hiccup,
//   refused, connect timeout, the call's deadline passed first); transient, nothing was sent.
// - EgressRedirectError: the peer answered 3xx. Redirects are never followed (a Location is chosen
//   by the peer, and following it would resend credentials and side effects elsewhere); permanent.
// - EgressBodyTooLargeError: the peer answered with a body over the caller's cap (a Content-Length
//   over it is refused at the headers, a chunked body when it passes the cap). The request was
//   delivered and answered, so it may have been applied.

export type EgressPolicy = 'public_only' | 'allow_private';

/** Refused by the egress policy before anything was sent. Permanent. */
export class EgressDeniedError extends Error {
  override name = 'EgressDeniedError';
}

/** The request never left: the host did not resolve or no connection was made. Safe to retry. */
export class EgressUnavailableError extends Error {
  override name = 'EgressUnavailableError';
}

/** The peer answered with a redirect, which is not followed. Permanent. */
export class EgressRedirectError extends Error {
  override name = 'EgressRedirectError';
  constructor(readonly status: number) {
    super(`outbound call answered HTTP ${status} (redirects are not followed)`);
  }
}

/**
 * The peer's answer had a body over the caller's cap; what was past it was not read and the
 * connection was closed. The request itself was delivered: it may have been applied.
 */
export class EgressBodyTooLargeError extends Error {
  override name = 'EgressBodyTooLargeError';
  constructor(
    readonly limitBytes: number,
    readonly status: number,
  ) {
    super(`outbound call answered HTTP ${status} with a body over ${limitBytes} bytes (not read past it)`);
  }
}

export type EgressError =
  | EgressDeniedError
  | EgressUnavailableError
  | EgressRedirectError
  | EgressBodyTooLargeError;

/** Resolves a host name to its addresses; `signal` aborts when the call's deadline passes. */
export type EgressResolver = (
  hostname: string,
  opts: { signal: AbortSignal },
) => Promise<readonly { address: string; family?: number }[]>;

/** The system resolver (getaddrinfo, as the OS configures it). */
export const systemResolver: EgressResolver = (hostname) => dnsLookup(hostname, { all: true });

// ---------------------------------------------------------------------------------------------
// Which addresses are internal
// ---------------------------------------------------------------------------------------------

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
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215)
  ['2001::', 32], // Teredo: a tunnel to an IPv4 address it embeds; no service a tenant configures lives there
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8],
] as const) {
  internal.addSubnet(net, prefix, 'ipv6');
}

/** The eight 16-bit groups of a valid IPv6 address (a trailing dotted quad included). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].map((g) => Number.parseInt(g, 16));
}

const ipv4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

export function isInternalAddress(address: string): boolean {
  const bare = address.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) is link-local anyway
  const family = isIP(bare);
  if (family === 4) return internal.check(bare, 'ipv4');
  if (family !== 6) return true;
  const g = ipv6Groups(bare);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  // ::/96 (unspecified, loopback, the deprecated IPv4-compatible ::a.b.c.d) and ::ffff:0:0/96
  // (IPv4-mapped, in any notation: ::ffff:7f00:1 is 127.0.0.1): never a public peer, and a
  // resolver asked for all families (as here) does not return them for a public host.
  if (zeros(0, 5) && (g[5] === 0 || g[5] === 0xffff)) return true;
  // ::ffff:0:0:0/96 (IPv4-translated, RFC 2765 ::ffff:0:a.b.c.d): likewise never a public peer.
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return true;
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach the IPv4 address they embed.
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return internal.check(ipv4Of(g[6]!, g[7]!), 'ipv4');
  if (g[0] === 0x2002) return internal.check(ipv4Of(g[1]!, g[2]!), 'ipv4');
  return internal.check(bare, 'ipv6');
}

// ---------------------------------------------------------------------------------------------
// The one outbound path
// ---------------------------------------------------------------------------------------------

/** Bounds lookup + TCP/TLS connect when the call itself sets no deadline. */
const CONNECT_TIMEOUT_MS = 10_000;

let policy: EgressPolicy = 'allow_private';
let resolver: EgressResolver = systemResolver;

/** What one egressFetch call knows about its own progress. */
interface CallState {
  signal: AbortSignal | undefined;
  /** handed to the dispatcher (arguments were valid) */
  dispatched: boolean;
  /** a socket was assigned and the request is about to be written: from here it may be applied */
  connected: boolean;
  /** the target is operator configuration (EgressInit.operatorTrusted): no address check */
  trusted?: boolean;
}

// The lookup runs inside undici's connector, which knows nothing of the call; the call that opened
// the connection is carried to it through the async context of its dispatch.
const currentCall = new AsyncLocalStorage<CallState>();

const connectLookup: LookupFunction = (hostname, options, callback) => {
  const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
  const call = currentCall.getStore();
  resolveChecked(hostname, family, call?.signal, call?.trusted === true).then(
    (addresses) => {
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    },
    (err: Error) => callback(err, ''),
  );
};

/** Resolves through the resolver, bounded by the call's deadline, and applies the policy. */
async function resolveChecked(
  host: string,
  family: number,
  callSignal: AbortSignal | undefined,
  trusted = false,
): Promise<{ address: string; family: number }[]> {
  const bound = AbortSignal.timeout(CONNECT_TIMEOUT_MS);
  const signal = callSignal ? AbortSignal.any([callSignal, bound]) : bound;
  let found: readonly { address: string; family?: number }[];
  try {
    found = await untilAborted(resolver(host, { signal }), signal);
  } catch (err) {
    throw new EgressUnavailableError(`outbound host ${host} did not resolve (${codeOf(err) ?? 'error'})`, {
      cause: err,
    });
  }
  const addresses = found
    .map((a) => ({ address: a.address, family: isIP(a.address) }))
    .filter((a) => a.family !== 0 && (family === 0 || a.family === family));
  if (addresses.length === 0) {
    throw new EgressUnavailableError(`outbound host ${host} did not resolve (no address)`);
  }
  if (policy === 'public_only' && !trusted && addresses.some((a) => isInternalAddress(a.address))) {
    throw new EgressDeniedError(`outbound host ${host} is an internal address (egress policy public_only)`);
  }
  return addresses;
}

function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

// maxRedirections: 0 is undici 6's default, stated: the Agent's redirect interceptor must never
// follow a Location either (fetch itself runs with redirect: 'manual').
const newAgent = () =>
  new Agent({ connect: { lookup: connectLookup, timeout: CONNECT_TIMEOUT_MS }, maxRedirections: 0 });
let agent = newAgent();
// Operator-trusted calls get a pool of their own: a socket opened to an internal address without
// the check must never be reused by a tenant's call to the same origin.
let trustedAgent = newAgent();

/** Connections already open were made under the old settings: start a fresh pool. */
function renewAgent(): void {
  const old = agent;
  agent = newAgent();
  old.close().catch(() => undefined);
  const oldTrusted = trustedAgent;
  trustedAgent = newAgent();
  oldTrusted.close().catch(() => undefined);
}

/** Set once by the entry point (SWITCHYARD_EGRESS). */
export function setEgressPolicy(next: EgressPolicy): void {
  policy = next;
  renewAgent();
}

/** Test hook: resolve host names with `fn` (undefined restores the system resolver). */
export function setEgressResolver(fn: EgressResolver | undefined): void {
  resolver = fn ?? systemResolver;
  renewAgent();
}

/** Marks the call connected when undici hands the request a socket (before any byte is written). */
class ConnectWatch extends DecoratorHandler {
  readonly #handler: Dispatcher.DispatchHandlers;
  readonly #call: CallState;
  constructor(handler: Dispatcher.DispatchHandlers, call: CallState) {
    super(handler);
    this.#handler = handler;
    this.#call = call;
  }
  onConnect(abort: (err?: Error) => void): void {
    this.#call.connected = true;
    this.#handler.onConnect?.(abort);
  }
}

/** One call's view of the shared agent: tracks progress and carries the call into the lookup. */
class CallDispatcher extends Dispatcher {
  readonly #call: CallState;
  constructor(call: CallState) {
    super();
    this.#call = call;
  }
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers): boolean {
    this.#call.dispatched = true;
    const watched = new ConnectWatch(handler, this.#call);
    const pool = this.#call.trusted ? trustedAgent : agent;
    return currentCall.run(this.#call, () => pool.dispatch(options, watched));
  }
}

/** Undici errors about the request itself, not the network: nothing to retry. */
const REQUEST_ERRORS = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
]);

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function isAbort(err: unknown): boolean {
  const name = (err as { name?: unknown } | null)?.name;
  return name === 'AbortError' || name === 'TimeoutError';
}

/** The egress error a failed fetch stands for when nothing was sent; undefined when it may have been. */
function notSentError(err: unknown, call: CallState, host: string): Error | undefined {
  const cause = (err as { cause?: unknown } | null)?.cause;
  if (cause instanceof EgressDeniedError || cause instanceof EgressUnavailableError) return cause;
  if (call.connected) return undefined;
  if (isAbort(err)) {
    return new EgressUnavailableError(`outbound host ${host} was not connected within the call's deadline`, {
      cause: err,
    });
  }
  if (!call.dispatched) {
    // fetch refused the request itself, before any connection (its "bad port" list): permanent.
    return err instanceof TypeError && cause instanceof Error
      ? new EgressDeniedError(`outbound request refused before connecting (${cause.message})`)
      : undefined;
  }
  const code = codeOf(cause);
  if (code !== undefined && REQUEST_ERRORS.has(code)) return undefined;
  return new EgressUnavailableError(`could not connect to outbound host ${host} (${code ?? 'error'})`, {
    cause: err,
  });
}

/** The URL of a call, refused unless it is http(s); a literal IP host is checked here (no lookup). */
function targetOf(input: string | URL, trusted = false): URL {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw new EgressDeniedError('outbound URL is not valid');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new EgressDeniedError(`outbound protocol ${url.protocol} is not allowed`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (policy === 'public_only' && !trusted && isIP(host) && isInternalAddress(host)) {
    throw new EgressDeniedError(`outbound host ${host} is an internal address (egress policy public_only)`);
  }
  return url;
}

/** The cap of a call that names none: no body is read without one. */
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

/** A fetch's init, with the most response body bytes the caller will read. */
export interface EgressInit extends RequestInit {
  /**
   * Cap on the (decoded) response body, DEFAULT_MAX_RESPONSE_BYTES when omitted. A Content-Length
   * over it is refused at the headers; otherwise the body errors with EgressBodyTooLargeError once
   * it passes the cap.
   */
  maxResponseBytes?: number;
  /**
   * The URL is the platform operator's own configuration, never a tenant's (an S3 endpoint the
   * operator listed in SWITCHYARD_ARTIFACT_ENDPOINTS): the address check is skipped, so it may be
   * an internal service. Redirects, caps and the no-proxy rule still apply.
   */
  operatorTrusted?: boolean;
}

/**
 * fetch behind the egress policy, never following a redirect, its body read with a cap. Throws
 * EgressDeniedError, EgressUnavailableError (nothing was sent), EgressRedirectError (a 3xx, body
 * discarded) or EgressBodyTooLargeError (a Content-Length over the cap); reading the body may
 * fail with EgressBodyTooLargeError too. Any other failure is fetch's own, after the request may
 * have left. Error messages name the host at most, never the URL (it can carry a credential).
 */
export async function egressFetch(input: string | URL, init: EgressInit = {}): Promise<Response> {
  const { maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES, operatorTrusted = false, ...rest } = init;
  // Fails closed: a NaN cap would compare false and read without bound.
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes < 0) {
    throw new TypeError('egressFetch needs maxResponseBytes, a non-negative integer');
  }
  const url = targetOf(input, operatorTrusted);
  const call: CallState = {
    signal: rest.signal ?? undefined,
    dispatched: false,
    connected: false,
    trusted: operatorTrusted,
  };
  let res: Awaited<ReturnType<typeof undiciFetch>>;
  try {
    res = await undiciFetch(url, {
      ...(rest as UndiciRequestInit),
      redirect: 'manual',
      dispatcher: new CallDispatcher(call),
    });
  } catch (err) {
    throw notSentError(err, call, url.hostname) ?? err;
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => undefined);
    throw new EgressRedirectError(res.status);
  }
  return capped(res, maxResponseBytes);
}

/** egressFetch as a plain fetch (for a client library such as the AI SDK), every body capped. */
export function cappedEgressFetch(maxResponseBytes: number): typeof fetch {
  return async (input, init) => {
    if (typeof input !== 'string' && !(input instanceof URL)) {
      throw new TypeError('egressFetch takes a URL; pass the request in init');
    }
    return egressFetch(input, { ...init, maxResponseBytes });
  };
}

/** Statuses whose response has no body (the parser ends them at the headers). */
const NULL_BODY_STATUS = new Set([204, 205, 304]);

/**
 * The response with its body behind the cap. Cancelling undici's body aborts the fetch, which
 * destroys the socket: nothing past the cap is read, and the connection is not reused.
 */
async function capped(res: Awaited<ReturnType<typeof undiciFetch>>, maxBytes: number): Promise<Response> {
  const declared = res.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) {
    const err = new EgressBodyTooLargeError(maxBytes, res.status);
    await res.body?.cancel(err).catch(() => undefined);
    throw err;
  }
  if (res.body === null || NULL_BODY_STATUS.has(res.status)) return res as unknown as Response;
  const reader = res.body.getReader();
  let received = 0;
  const body = new ReadableStream<Uint8Array>(
    {
      // One chunk per read asked for (highWaterMark 0): nothing is buffered ahead of the caller.
      async pull(controller) {
        const next = await reader.read();
        if (next.done) {
          controller.close();
          return;
        }
        received += next.value.byteLength;
        if (received > maxBytes) {
          const err = new EgressBodyTooLargeError(maxBytes, res.status);
          controller.error(err);
          await reader.cancel(err).catch(() => undefined);
          return;
        }
        controller.enqueue(next.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return new Response(body, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers as unknown as Headers,
  });
}

/** The egress error behind `err` (itself or along its cause chain, as the AI SDK wraps it). */
export function egressErrorOf(err: unknown): EgressError | undefined {
  let current = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    if (
      current instanceof EgressDeniedError ||
      current instanceof EgressUnavailableError ||
      current instanceof EgressRedirectError ||
      current instanceof EgressBodyTooLargeError
    ) {
      return current;
    }
    current = current.cause;
  }
  return undefined;
}
