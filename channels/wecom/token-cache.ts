import { createHmac, randomBytes } from 'node:crypto';
import { encodeTuple } from '../../lib/digest';
import { EgressBodyTooLargeError, egressFetch } from '../../lib/egress';
import { CHANNEL_MAX_RESPONSE_BYTES, egressSendFailure, type SendResult } from '../send-result';

/**
 * In-process cache of WeCom access tokens (`GET {base}/cgi-bin/gettoken?corpid&corpsecret`).
 *
 * - One slot per (api base, corp id, agent id) — and per credential: the slot key also carries an
 *   HMAC of corp_secret under a random per-process key, so a binding with a different (e.g. wrong or
 *   rotated) secret never reuses a token fetched with another one. The HMAC reveals nothing about
 *   the secret and is never logged; the secret and the token themselves never enter a key, a log,
 *   an error or a returned value other than the token to the sender.
 * - Expiry: `expires_in` minus a margin (5 min, or a quarter of a short lifetime).
 * - Single flight: concurrent callers that need a token share one gettoken request.
 * - `get(req, { rejectToken })` is the refresh path after a send answered "token expired/invalid":
 *   it refreshes only if the cached token is still the rejected one, so N concurrent senders that
 *   all hit 42001 with the same token cause exactly one gettoken.
 * Correctness never depends on this cache (a cold cache only costs a gettoken), so it is fine for
 * each API/worker process to hold its own.
 */
export interface WecomCredentials {
  apiBaseUrl: string;
  corpId: string;
  corpSecret: string;
  agentId: number;
  timeoutMs: number;
}

/**
 * A token, or why there is none: a WeCom `errcode` (the client classifies it, e.g. 40001 → invalid
 * credential) or an already classified transport/HTTP failure.
 */
export type TokenOutcome =
  | { ok: true; token: string }
  | { ok: false; errcode: number }
  | { ok: false; result: SendResult };

interface Slot {
  token: string | undefined;
  expiresAt: number;
  inflight: Promise<TokenOutcome> | undefined;
}

interface GettokenResponse {
  errcode?: number;
  access_token?: string;
  expires_in?: number;
}

const MAX_SLOTS = 1024;

/** A gettoken answer over the cap: retried like any bad answer (gettoken changes nothing). */
const TOO_LARGE: SendResult = { kind: 'retryable', reasonClass: 'gettoken_response_too_large' };

export class WecomTokenCache {
  private readonly slots = new Map<string, Slot>();
  private readonly tagKey = randomBytes(32);
  private readonly now: () => number;
  /** gettoken requests this cache has made (for tests and metrics). */
  fetches = 0;

  constructor(opts: { now?: () => number } = {}) {
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.slots.size;
  }

  async get(cred: WecomCredentials, opts: { rejectToken?: string } = {}): Promise<TokenOutcome> {
    const key = this.keyOf(cred);
    let slot = this.slots.get(key);
    if (!slot) {
      this.evictIdle();
      slot = { token: undefined, expiresAt: 0, inflight: undefined };
      this.slots.set(key, slot);
    }
    if (slot.inflight) return slot.inflight;
    if (slot.token !== undefined && slot.token !== opts.rejectToken && this.now() < slot.expiresAt) {
      return { ok: true, token: slot.token };
    }
    slot.token = undefined;
    const s = slot;
    const flight = this.fetchToken(cred)
      .then((r) => {
        if (r.ok) {
          s.token = r.token;
          s.expiresAt = this.now() + r.ttlMs;
          return { ok: true as const, token: r.token };
        }
        return r;
      })
      .finally(() => {
        s.inflight = undefined;
      });
    s.inflight = flight;
    return flight;
  }

  /** Drops a token known to be bad (only if it is still the cached one). */
  invalidate(cred: WecomCredentials, token: string): void {
    const slot = this.slots.get(this.keyOf(cred));
    if (slot && slot.token === token) slot.token = undefined;
  }

  clear(): void {
    this.slots.clear();
  }

  private keyOf(cred: WecomCredentials): string {
    const tag = createHmac('sha256', this.tagKey).update(cred.corpSecret, 'utf8').digest('hex').slice(0, 32);
    return encodeTuple([normalizeBase(cred.apiBaseUrl), cred.corpId, String(cred.agentId), tag]);
  }

  private evictIdle(): void {
    if (this.slots.size < MAX_SLOTS) return;
    const now = this.now();
    for (const [k, s] of this.slots) if (!s.inflight && s.expiresAt <= now) this.slots.delete(k);
    // Still full of live tokens: drop the oldest inserted idle slot (a cold slot costs one gettoken).
    if (this.slots.size >= MAX_SLOTS) {
      for (const [k, s] of this.slots) {
        if (!s.inflight) {
          this.slots.delete(k);
          break;
        }
      }
    }
  }

  private async fetchToken(
    cred: WecomCredentials,
  ): Promise<{ ok: true; token: string; ttlMs: number } | Exclude<TokenOutcome, { ok: true }>> {
    this.fetches++;
    const url = new URL(`${normalizeBase(cred.apiBaseUrl)}/cgi-bin/gettoken`);
    url.searchParams.set('corpid', cred.corpId);
    url.searchParams.set('corpsecret', cred.corpSecret);
    let res: Response;
    try {
      res = await egressFetch(url, {
        method: 'GET',
        signal: AbortSignal.timeout(cred.timeoutMs),
        maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
      });
    } catch (err) {
      // gettoken has no side effect: every transport failure after the request left is retryable
      // too, an answer over the cap included (for a send that would be `unknown`; here nothing was).
      if (err instanceof EgressBodyTooLargeError) return { ok: false, result: TOO_LARGE };
      const result: SendResult = egressSendFailure(err) ?? {
        kind: 'retryable',
        reasonClass: `gettoken_${transportClass(err)}`,
      };
      return { ok: false, result };
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => undefined);
      const retryable = res.status >= 500 || res.status === 429;
      return {
        ok: false,
        result: retryable
          ? { kind: 'retryable', reasonClass: `gettoken_http_${res.status}` }
          : { kind: 'permanent', reasonClass: `gettoken_http_${res.status}` },
      };
    }
    let json: GettokenResponse;
    try {
      json = (await res.json()) as GettokenResponse;
    } catch (err) {
      if (err instanceof EgressBodyTooLargeError) return { ok: false, result: TOO_LARGE };
      return { ok: false, result: { kind: 'retryable', reasonClass: 'gettoken_bad_response' } };
    }
    const errcode = typeof json.errcode === 'number' ? json.errcode : 0;
    if (errcode !== 0) return { ok: false, errcode };
    if (typeof json.access_token !== 'string' || json.access_token === '') {
      return { ok: false, result: { kind: 'retryable', reasonClass: 'gettoken_bad_response' } };
    }
    const expiresIn = typeof json.expires_in === 'number' && json.expires_in > 0 ? json.expires_in : 7200;
    const marginS = Math.min(300, Math.floor(expiresIn / 4));
    return { ok: true, token: json.access_token, ttlMs: (expiresIn - marginS) * 1000 };
  }
}

/** The process-wide cache the delivery activity uses. */
export const wecomTokenCache = new WecomTokenCache();

export function normalizeBase(base: string): string {
  return base.replace(/\/+$/, '');
}

/**
 * Coarse class of a transport failure after the request may have left (the egress layer reports
 * the ones before it); never carries the error message (it may contain the URL).
 */
export function transportClass(err: unknown): 'timeout' | 'connection_dropped' {
  const e = err as { name?: string } | null;
  return e?.name === 'TimeoutError' || e?.name === 'AbortError' ? 'timeout' : 'connection_dropped';
}
