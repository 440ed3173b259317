import { egressFetch } from '../../lib/egress';
import type { ReplyTarget } from '../inbound';
import { CHANNEL_MAX_RESPONSE_BYTES, egressSendFailure, type SendResult } from '../send-result';
import {
  normalizeBase,
  type TokenOutcome,
  transportClass,
  type WecomTokenCache,
  wecomTokenCache,
} from './token-cache';

export const WECOM_API_BASE = 'https://qyapi.weixin.qq.com';

/**
 * WeCom's duplicate check answers a resend of the same (agent, recipient, content) within the
 * interval with the original msgid and does not deliver it again. It is also blind to intent: a
 * second, genuine "OK" to the same user inside the interval is swallowed too. So the interval is
 * just long enough to cover the retry horizon of one segment send (12 attempts, back-off capped at
 * 1 min, plus a 60 s lease ≈ 12 min), not WeCom's 4 h maximum.
 */
export const WECOM_DEFAULT_DUPLICATE_CHECK_INTERVAL_S = 900;
/** The longest interval WeCom accepts. */
const WECOM_MAX_DUPLICATE_CHECK_INTERVAL_S = 14_400;

export interface WecomSendInput {
  apiBaseUrl: string;
  corpId: string;
  corpSecret: string;
  agentId: number;
  target: ReplyTarget;
  text: string;
  /** Instead of the text: an image or file uploaded with media/upload (channels/wecom/media.ts). */
  message?: { msgtype: 'image' | 'file'; mediaId: string };
  timeoutMs: number;
  /** Seconds; default 900 (the retry horizon), at most 14400 (WeCom's maximum). */
  duplicateCheckIntervalS?: number;
  /** Defaults to the process-wide cache; tests pass their own. */
  tokenCache?: WecomTokenCache;
}

interface WecomSendResponse {
  errcode?: number;
  errmsg?: string;
  msgid?: string;
  invaliduser?: string;
}

/** errcodes that mean "this access token is no longer good": refresh once and resend once. */
const TOKEN_REJECTED = new Set([42001, 40014, 42009]);

/** Back-off hints for WeCom's "busy / over limit" answers (HTTP 200 with errcode). */
const RETRYABLE: ReadonlyMap<number, { reasonClass: string; retryAfterMs: number }> = new Map([
  [-1, { reasonClass: 'system_busy', retryAfterMs: 1000 }],
  [45009, { reasonClass: 'rate_limited', retryAfterMs: 5000 }], // API call frequency over the limit
  [45033, { reasonClass: 'concurrency_limited', retryAfterMs: 2000 }], // concurrent call limit
  [45047, { reasonClass: 'quota_exceeded', retryAfterMs: 5000 }], // send quota exceeded
]);

const PERMANENT: ReadonlyMap<number, string> = new Map([
  [81013, 'invalid_user'], // user & party & tag all invalid
  [60111, 'invalid_user'], // userid not found
  [40003, 'invalid_user'], // invalid userid
  [86003, 'chat_not_found'], // chatid does not exist
  [86004, 'chat_not_found'],
  [86001, 'chat_not_found'], // invalid chatid
  [40001, 'invalid_credential'], // invalid secret
  [40013, 'invalid_credential'], // invalid corpid
  [41002, 'invalid_credential'], // corpid missing
  [41004, 'invalid_credential'], // corpsecret missing
  [40056, 'invalid_credential'], // invalid agentid
  [45002, 'bad_content'], // content too long
  [44004, 'bad_content'], // empty content
]);

/** Classifies a WeCom business error (HTTP 200, errcode ≠ 0). */
export function classifyWecomErrcode(errcode: number): SendResult {
  const retry = RETRYABLE.get(errcode);
  if (retry) return { kind: 'retryable', ...retry };
  const permanent = PERMANENT.get(errcode);
  if (permanent) return { kind: 'permanent', reasonClass: permanent };
  if (TOKEN_REJECTED.has(errcode)) return { kind: 'retryable', reasonClass: 'access_token_rejected' };
  return { kind: 'permanent', reasonClass: `errcode_${errcode < 0 ? `m${-errcode}` : errcode}` };
}

/**
 * Sends one text message: `message/send` to the user of a direct conversation, `appchat/send` to
 * the chat of a group conversation, with `enable_duplicate_check` so a resend after an unknown
 * outcome is suppressed by WeCom within the interval. An access token rejected as expired or invalid
 * is refreshed (single flight) and the send retried once; that is safe because the rejected send was
 * not applied. Never throws; never returns or logs corp_secret or the access token.
 */
export async function wecomSendText(input: WecomSendInput): Promise<SendResult> {
  const cache = input.tokenCache ?? wecomTokenCache;
  const cred = {
    apiBaseUrl: input.apiBaseUrl,
    corpId: input.corpId,
    corpSecret: input.corpSecret,
    agentId: input.agentId,
    timeoutMs: input.timeoutMs,
  };
  const first = await cache.get(cred);
  if (!first.ok) return tokenFailure(first);
  const attempt = await postSend(input, first.token);
  if (attempt !== 'token_rejected') return attempt;

  const second = await cache.get(cred, { rejectToken: first.token });
  if (!second.ok) return tokenFailure(second);
  const retried = await postSend(input, second.token);
  if (retried !== 'token_rejected') return retried;
  cache.invalidate(cred, second.token);
  return { kind: 'retryable', reasonClass: 'access_token_rejected' };
}

function tokenFailure(t: Exclude<TokenOutcome, { ok: true }>): SendResult {
  return 'errcode' in t ? classifyWecomErrcode(t.errcode) : t.result;
}

async function postSend(input: WecomSendInput, token: string): Promise<SendResult | 'token_rejected'> {
  const group = input.target.chatType === 'group';
  const base = normalizeBase(input.apiBaseUrl);
  const url = `${base}/cgi-bin/${group ? 'appchat/send' : 'message/send'}?access_token=${encodeURIComponent(token)}`;
  const interval = Math.min(
    Math.max(Math.trunc(input.duplicateCheckIntervalS ?? WECOM_DEFAULT_DUPLICATE_CHECK_INTERVAL_S), 1),
    WECOM_MAX_DUPLICATE_CHECK_INTERVAL_S,
  );
  const body = {
    ...(group ? { chatid: input.target.chatId } : { touser: input.target.userId, agentid: input.agentId }),
    ...(input.message
      ? { msgtype: input.message.msgtype, [input.message.msgtype]: { media_id: input.message.mediaId } }
      : { msgtype: 'text', text: { content: input.text } }),
    safe: 0,
    enable_duplicate_check: 1,
    duplicate_check_interval: interval,
  };
  let res: Response;
  try {
    res = await egressFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
  } catch (err) {
    // Not sent (no address, no connection) never reached WeCom; timeout / reset after writing, or an
    // answer over the cap, may have been applied, and a resend is covered by the duplicate check.
    return egressSendFailure(err) ?? { kind: 'unknown', reasonClass: transportClass(err) };
  }
  let json: WecomSendResponse;
  try {
    json = (await res.json()) as WecomSendResponse;
  } catch (err) {
    // An answer over the cap came from a peer that got the send: unknown, whatever its status.
    const egress = egressSendFailure(err);
    if (egress) return egress;
    if (res.status !== 200) return httpFailure(res.status);
    // Headers arrived, the body did not (or was not JSON): the message may have been accepted.
    const cls = transportClass(err);
    return { kind: 'unknown', reasonClass: cls === 'timeout' ? 'timeout' : 'response_truncated' };
  }
  if (res.status !== 200) return httpFailure(res.status);
  // No errcode at all is not a WeCom answer; a resend is covered by the duplicate check.
  if (typeof json?.errcode !== 'number') return { kind: 'retryable', reasonClass: 'bad_response' };
  const errcode = json.errcode;
  if (errcode === 0) {
    if (!group && invalidRecipient(json.invaliduser, input.target.userId)) {
      return { kind: 'permanent', reasonClass: 'invalid_user' };
    }
    return { kind: 'sent', providerMessageId: typeof json.msgid === 'string' ? json.msgid : '' };
  }
  if (TOKEN_REJECTED.has(errcode)) return 'token_rejected';
  return classifyWecomErrcode(errcode);
}

/** A 5xx (or 429) from WeCom or a proxy in front of it is retried; the duplicate check covers a resend. */
function httpFailure(status: number): SendResult {
  return status >= 500 || status === 429
    ? { kind: 'retryable', reasonClass: `http_${status}` }
    : { kind: 'permanent', reasonClass: `http_${status}` };
}

/** message/send answers errcode 0 with `invaliduser` when some recipients were dropped. */
function invalidRecipient(invaliduser: string | undefined, userId: string): boolean {
  return typeof invaliduser === 'string' && invaliduser.split('|').includes(userId);
}
