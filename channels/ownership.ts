import { EgressDeniedError, egressFetch } from '../lib/egress';
import { classifyWecomErrcode } from './wecom/client';
import { normalizeBase, WecomTokenCache } from './wecom/token-cache';

// Proof that a binding's credentials control the provider account it names, asked of the provider
// itself when a binding is activated: a bot id or corp id alone is public, and whoever activates a
// binding first would otherwise lock the real owner out. Read-only calls (getMe, gettoken), so a
// retry is always safe. Nothing here returns, logs or throws a token: failures are a class only.

/** Why the provider did not confirm the account. */
export type OwnershipFailure =
  /** the provider refused the credentials (Telegram 401/404, a WeCom credential errcode) */
  | 'token_rejected'
  /** the credentials are valid but belong to another account */
  | 'account_mismatch'
  /** the binding's api_base_url is not the provider's nor one the platform allows for proofs */
  | 'api_base_not_allowed'
  /** no answer, a 5xx/429, a redirect or a body that is not the provider's protocol */
  | 'provider_unreachable'
  /** the egress policy refuses the binding's api_base_url */
  | 'egress_denied';

export type OwnershipResult = { ok: true } | { ok: false; failure: OwnershipFailure };

const fail = (failure: OwnershipFailure): OwnershipResult => ({ ok: false, failure });

/** A refused egress is a configuration error; no connection, a redirect or a timeout is transient. */
function transportFailure(err: unknown): OwnershipResult {
  return fail(err instanceof EgressDeniedError ? 'egress_denied' : 'provider_unreachable');
}

interface GetMeResponse {
  ok?: boolean;
  result?: { id?: unknown; is_bot?: unknown };
  error_code?: number;
}

/** Telegram `getMe` with the bot token must answer the binding's bot id (provider_account_id). */
export async function proveTelegramBot(p: {
  apiBaseUrl: string;
  botToken: string;
  botId: string;
  timeoutMs: number;
}): Promise<OwnershipResult> {
  let json: GetMeResponse;
  try {
    const res = await egressFetch(`${normalizeBase(p.apiBaseUrl)}/bot${p.botToken}/getMe`, {
      method: 'GET',
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(p.timeoutMs),
    });
    // The Bot API answers 401 for a revoked or unknown token and 404 for one it cannot parse.
    if (res.status === 401 || res.status === 404) {
      await res.body?.cancel().catch(() => undefined);
      return fail('token_rejected');
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => undefined);
      return fail('provider_unreachable');
    }
    json = (await res.json()) as GetMeResponse;
  } catch (err) {
    return transportFailure(err);
  }
  if (json?.ok !== true || !json.result) return fail('provider_unreachable');
  const { id, is_bot: isBot } = json.result;
  if (isBot !== true || (typeof id !== 'number' && typeof id !== 'string')) {
    return fail('provider_unreachable');
  }
  return String(id) === p.botId ? { ok: true } : fail('account_mismatch');
}

/**
 * WeCom `gettoken` for the binding's corp with the corp secret must succeed. A fresh token cache
 * per proof, so a token cached earlier never stands in for asking WeCom now.
 */
export async function proveWecomApp(p: {
  apiBaseUrl: string;
  corpId: string;
  corpSecret: string;
  agentId: number;
  timeoutMs: number;
}): Promise<OwnershipResult> {
  const outcome = await new WecomTokenCache().get(p);
  if (outcome.ok) return { ok: true };
  if ('errcode' in outcome) {
    // Busy / over the limit is WeCom's transient answer; any other errcode refuses the credentials
    // (40001 invalid secret, 40013 invalid corpid, 41002/41004 missing).
    return classifyWecomErrcode(outcome.errcode).kind === 'retryable'
      ? fail('provider_unreachable')
      : fail('token_rejected');
  }
  return outcome.result.kind === 'permanent' && outcome.result.reasonClass === 'egress_denied'
    ? fail('egress_denied')
    : fail('provider_unreachable');
}
