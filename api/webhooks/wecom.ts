import { type OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { isTimestampFresh, parseEncodingAesKey, verifyAndDecrypt } from '../../channels/wecom/crypto';
import { normalizeWecomMessage } from '../../channels/wecom/inbound';
import { parseEnvelope, parseInnerMessage, type WecomXmlFailure } from '../../channels/wecom/xml';
import { claimNonce, pruneReplayGuard } from '../../db/queries/replay-guard';
import { RegistryUnavailable } from '../../registry/cache';
import { activeTraceId } from '../../telemetry/trace-id';
import { textProblem } from '../body-guard';
import type { AppEnv, IngressAppDeps } from '../deps';
import { errorResponse } from '../errors';
import { type Candidate, resolveCandidate, routeKeyDigest, type Verifier } from '../ingress/candidate';
import { recordAndStart } from '../ingress/record';
import { rejectUnverified, unavailable } from './fixed';
import { setWebhookOutcome } from './metrics';
import type { SecuritySink } from './security-sink';

/** Contract: the WeCom timestamp window is ±300 s. */
export const WECOM_TIMESTAMP_WINDOW_S = 300;
/** One request in this many prunes expired replay-guard rows (bounded delete, off the answer path). */
const PRUNE_ONE_IN = 64;

const XML_MEDIA_TYPES = new Set(['text/xml', 'application/xml']);
const TIMESTAMP_RE = /^[0-9]{1,15}$/;
/** msg_signature is a SHA-1 in lowercase hex; anything else cannot verify. */
const SIGNATURE_SHAPE = /^[0-9a-f]{40}$/;

const ENVELOPE_FAILURE: Readonly<Record<WecomXmlFailure, string>> = {
  malformed: 'malformed_envelope',
  invalid_shape: 'malformed_envelope',
  forbidden_markup: 'envelope_forbidden_markup',
  too_large: 'envelope_too_large',
};

interface SignedQuery {
  msg_signature: string;
  timestamp: string;
  nonce: string;
}

/**
 * WeCom callback ingress (seeds: architecture §4–5), mirroring the Telegram route:
 * resolveCandidate → verifier → every pre-trust failure is rejectUnverified (one fixed 401, cause
 * only in the tenant-less security sink) → trust() → normalize → recordAndStart.
 *
 * Request-shape checks that do not depend on the route — missing/ill-formed query parameters (400),
 * a non-XML content type (415), an oversize body (413, the app's bodyLimit) — are answered before
 * the route key is even looked up. They are identical for every route key, known or not, so they
 * reveal nothing about bindings and cost no database round trip or security-sink row; in
 * particular the 415 comes before verification because without an XML body there is no `Encrypt`
 * to verify, and answering it after a lookup would only add work for garbage.
 */
export function registerWecomWebhook(
  app: OpenAPIHono<AppEnv>,
  deps: IngressAppDeps,
  sink: SecuritySink,
): void {
  const signed = {
    msg_signature: z.string().describe('sha1(sort(token, timestamp, nonce, encrypted)), hex'),
    timestamp: z.string().describe('Unix seconds; accepted within ±300 s'),
    nonce: z.string(),
  };
  const params = z.object({ route_key: z.string() });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/v1/webhooks/wecom/{route_key}',
    tags: ['webhooks'],
    summary: 'WeCom callback URL verification (echostr)',
    description:
      'Query values are taken from the raw query string with percent-decoding only: a literal `+` in ' +
      '`echostr` stays `+` (WeCom signs the decoded value).',
    request: {
      params,
      query: z.object({ ...signed, echostr: z.string().describe('Encrypted echo string (base64)') }),
    },
    responses: {
      200: {
        description: 'Verified: the decrypted echostr, verbatim',
        content: { 'text/plain': { schema: z.string() } },
      },
      400: { description: 'A required query parameter is missing or ill-formed' },
      401: { description: 'Unknown route or failed verification (one fixed answer)' },
      429: { description: 'Too many failed verifications from this address on this route (Retry-After)' },
      503: { description: 'Configuration could not be read and none fresh enough is cached (Retry-After)' },
    },
  });
  app.openAPIRegistry.registerPath({
    method: 'post',
    path: '/v1/webhooks/wecom/{route_key}',
    tags: ['webhooks'],
    summary: 'WeCom callback message (encrypted XML envelope)',
    request: {
      params,
      query: z.object(signed),
      body: {
        required: true,
        content: {
          'text/xml': { schema: z.string().describe('<xml><ToUserName/><Encrypt/><AgentID/></xml>') },
          'application/xml': { schema: z.string() },
        },
      },
    },
    responses: {
      200: {
        description:
          'Recorded (also when its workflow could not be started yet: the repair sweeper starts it), ' +
          'duplicate, or acknowledged without execution: empty body',
      },
      400: { description: 'Missing query parameter, or a verified message whose inner XML is invalid' },
      401: { description: 'Unknown route or failed verification (one fixed answer)' },
      413: { description: 'Body too large' },
      415: { description: 'Content type is not text/xml or application/xml' },
      429: { description: 'Too many failed verifications from this address on this route (Retry-After)' },
      503: { description: 'Configuration could not be read and none fresh enough is cached (Retry-After)' },
    },
  });

  app.get('/v1/webhooks/wecom/:route_key', async (c) => {
    const q = readQuery(c.req.url, ['msg_signature', 'timestamp', 'nonce', 'echostr']);
    if (!q.ok) return errorResponse(c, 'validation_failed', q.message, { fields: q.fields });

    const early = rejectIllFormedSignature(c, q.value);
    if (early) return early;
    const resolved = await lookUp(c.req.param('route_key'));
    if (!resolved) return unavailable(c);
    const { digest, candidate } = resolved;
    if (!candidate) return reject(c, digest, 'unknown_route');
    const v = await verify(c, candidate, q.value, q.value.echostr);
    if (!v.ok) return v.response;

    const ctx = v.verifier.trust();
    if (ctx.tenantStatus === 'disabled') return reject(c, digest, 'tenant_disabled');
    setWebhookOutcome(c, 'url_verified');
    return c.text(v.plaintext, 200);
  });

  app.post('/v1/webhooks/wecom/:route_key', async (c) => {
    const q = readQuery(c.req.url, ['msg_signature', 'timestamp', 'nonce']);
    if (!q.ok) return errorResponse(c, 'validation_failed', q.message, { fields: q.fields });
    const mediaType = (c.req.header('content-type') ?? '').split(';', 1)[0]!.trim().toLowerCase();
    if (!XML_MEDIA_TYPES.has(mediaType)) {
      return errorResponse(c, 'unsupported_media_type', 'WeCom callbacks are text/xml or application/xml.');
    }
    const early = rejectIllFormedSignature(c, q.value);
    if (early) return early;
    const body = await c.req.text();

    const resolved = await lookUp(c.req.param('route_key'));
    if (!resolved) return unavailable(c);
    const { digest, candidate } = resolved;
    if (!candidate) return reject(c, digest, 'unknown_route');
    // The envelope must be parsed to find `Encrypt`, i.e. before verification: a failure here is
    // a pre-trust failure like any other (fixed 401, no tenant read or write).
    const envelope = parseEnvelope(body);
    if (!envelope.ok) return reject(c, digest, ENVELOPE_FAILURE[envelope.reason]);
    const v = await verify(c, candidate, q.value, envelope.value.encrypt);
    if (!v.ok) return v.response;

    const ctx = v.verifier.trust();
    if (ctx.tenantStatus === 'disabled') return reject(c, digest, 'tenant_disabled');
    // Verified and decrypted: the message itself must be storable (U+0000 cannot be stored).
    const unstorable = textProblem(v.plaintext, false);
    if (unstorable) return errorResponse(c, 'validation_failed', unstorable);
    const inner = parseInnerMessage(v.plaintext);
    if (!inner.ok) {
      return errorResponse(c, 'validation_failed', 'The decrypted message is not a valid WeCom message.', {
        reason: inner.reason,
      });
    }
    const normalized = normalizeWecomMessage(inner.value);
    if (!normalized.ok) {
      return errorResponse(c, 'validation_failed', 'The decrypted message is not a valid WeCom message.', {
        reason: normalized.reason,
      });
    }

    const requestId = c.get('requestId');
    const outcome = await recordAndStart(deps, ctx, normalized.message, {
      requestId,
      traceId: activeTraceId(),
    });
    if (outcome.kind === 'not_routed') return reject(c, digest, 'tenant_disabled');
    setWebhookOutcome(c, outcome.kind);
    return c.body(null, 200);
  });

  /** The candidate, or null when the registry is unavailable (the caller answers 503). */
  const lookUp = (routeKey: string) =>
    resolveCandidate(deps, 'wecom', routeKey).catch((err: unknown) => {
      if (err instanceof RegistryUnavailable) return null;
      throw err;
    });

  const reject = (c: Context<AppEnv>, routeKeyDigest: string, failureClass: string) =>
    rejectUnverified(c, sink, { channel: 'wecom', routeKeyDigest, failureClass });

  /**
   * A signature that cannot be a SHA-1 hex digest fails verification on any route, so it is
   * refused before the route lookup (no database read), with the same fixed 401 and class as a
   * wrong signature on a known route.
   */
  const rejectIllFormedSignature = (c: Context<AppEnv>, q: SignedQuery) =>
    SIGNATURE_SHAPE.test(q.msg_signature)
      ? null
      : reject(c, routeKeyDigest(c.req.param('route_key') ?? ''), 'bad_signature');

  /**
   * The shared pre-trust checks of GET and POST, in this order: binding credentials → signature
   * (constant time, over the ciphertext as received) and, only if it holds, decryption with the
   * receive id (channels/wecom/crypto verifyAndDecrypt) → timestamp window → binding active →
   * nonce replay guard (the only write, tenant-less; see db/queries/replay-guard.ts).
   */
  async function verify(
    c: Context<AppEnv>,
    candidate: Candidate,
    q: SignedQuery,
    ciphertext: string,
  ): Promise<{ ok: true; plaintext: string; verifier: Verifier } | { ok: false; response: Response }> {
    const fail = async (failureClass: string) => ({
      ok: false as const,
      response: await reject(c, candidate.routeKeyDigest, failureClass),
    });
    const verifier = candidate.verifier('webhook_verification');
    const creds = credentialsOf(verifier);
    if (!creds) {
      deps.log.warn(
        { requestId: c.get('requestId'), routeKeyDigest: candidate.routeKeyDigest },
        'wecom binding secret or config has the wrong shape',
      );
      return fail('binding_misconfigured');
    }
    // Signature first (constant time), decryption only after it, so CBC decryption is no oracle.
    const plain = verifyAndDecrypt({
      token: creds.token,
      encodingAesKey: creds.encodingAesKey,
      receiveId: creds.corpId,
      timestamp: q.timestamp,
      nonce: q.nonce,
      encrypt: ciphertext,
      signature: q.msg_signature,
    });
    if (!plain.ok && plain.reason === 'bad_signature') return fail('bad_signature');
    const now = deps.now();
    if (!isTimestampFresh(q.timestamp, now, WECOM_TIMESTAMP_WINDOW_S)) {
      return fail(Number(q.timestamp) * 1000 > now ? 'future_timestamp' : 'stale_timestamp');
    }
    if (!plain.ok)
      return fail(plain.reason === 'receive_id_mismatch' ? 'receive_id_mismatch' : 'bad_ciphertext');
    if (!candidate.active) return fail('binding_not_active');

    const claim = await claimNonce(deps.sql, {
      routeKeyDigest: candidate.routeKeyDigest,
      nonce: q.nonce,
      signature: q.msg_signature,
    });
    if (claim === 'replayed') return fail('replayed_nonce');
    if (claim === 'fresh' && Math.random() * PRUNE_ONE_IN < 1) {
      void pruneReplayGuard(deps.sql, { windowSeconds: WECOM_TIMESTAMP_WINDOW_S }).catch((err: unknown) =>
        deps.log.warn({ err: (err as Error).message }, 'replay guard prune failed'),
      );
    }
    return { ok: true, plaintext: plain.message, verifier };
  }
}

function credentialsOf(v: Verifier): { token: string; encodingAesKey: string; corpId: string } | null {
  const token = v.secret.token;
  const encodingAesKey = v.secret.encoding_aes_key;
  const corpId = v.bindingConfig.corp_id;
  if (typeof token !== 'string' || token === '') return null;
  if (typeof corpId !== 'string' || corpId === '') return null;
  if (typeof encodingAesKey !== 'string') return null;
  try {
    parseEncodingAesKey(encodingAesKey);
  } catch {
    return null;
  }
  return { token, encodingAesKey, corpId };
}

type QueryResult<K extends string> =
  | { ok: true; value: Record<K, string> }
  | { ok: false; message: string; fields: { path: string; message: string }[] };

const MAX_PARAM_CHARS: Readonly<Record<string, number>> = {
  msg_signature: 128,
  timestamp: 15,
  nonce: 128,
  echostr: 4096,
};

/**
 * Reads the required parameters from the RAW query string. URLSearchParams (and Hono's
 * c.req.query) decode `+` as a space, form-style; WeCom percent-encodes its values and signs the
 * decoded echostr, in which `+` is a base64 character. So: split on `&`, split at the first `=`,
 * percent-decode only. A parameter given twice is ambiguous and refused.
 */
export function readQuery<K extends string>(url: string, names: readonly K[]): QueryResult<K> {
  const search = new URL(url).search.replace(/^\?/, '');
  const seen = new Map<string, string[]>();
  const fields: { path: string; message: string }[] = [];
  for (const part of search === '' ? [] : search.split('&')) {
    const eq = part.indexOf('=');
    const rawKey = eq === -1 ? part : part.slice(0, eq);
    const rawValue = eq === -1 ? '' : part.slice(eq + 1);
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(rawKey);
      value = decodeURIComponent(rawValue);
    } catch {
      if ((names as readonly string[]).includes(rawKey))
        fields.push({ path: rawKey, message: 'bad encoding' });
      continue;
    }
    const list = seen.get(key) ?? [];
    list.push(value);
    seen.set(key, list);
  }
  const value = {} as Record<K, string>;
  for (const name of names) {
    const values = seen.get(name);
    if (fields.some((f) => f.path === name)) continue;
    if (!values || values.length === 0 || values[0] === '') {
      fields.push({ path: name, message: 'required' });
    } else if (values.length > 1) {
      fields.push({ path: name, message: 'given more than once' });
    } else if (values[0]!.length > (MAX_PARAM_CHARS[name] ?? 1024)) {
      fields.push({ path: name, message: 'too long' });
    } else if (name === 'timestamp' && !TIMESTAMP_RE.test(values[0]!)) {
      fields.push({ path: name, message: 'must be decimal Unix seconds' });
    } else {
      value[name] = values[0]!;
    }
  }
  if (fields.length > 0)
    return { ok: false, message: 'Required query parameters are missing or invalid.', fields };
  return { ok: true, value };
}
