import {
  EgressBodyTooLargeError,
  EgressDeniedError,
  EgressRedirectError,
  EgressUnavailableError,
} from '../lib/egress';

/**
 * Cap on a channel API's answer (Telegram's sendMessage, WeCom's message/send, appchat/send and
 * gettoken). Their real answers are a few KiB at most (a Bot API Message with a 4096-character text
 * and its entities; a WeCom errcode/msgid object of a few hundred bytes): 1 MiB is two orders of
 * magnitude above, and bounds what a hostile api_base_url can make a worker hold per send.
 */
export const CHANNEL_MAX_RESPONSE_BYTES = 1024 * 1024;

/**
 * The outcome of one outbound send, as the delivery activity needs it. `unknown` means the
 * request may have been applied (timeout after it left, connection dropped mid-response).
 */
export type SendResult =
  | { kind: 'sent'; providerMessageId: string }
  | { kind: 'retryable'; reasonClass: string; retryAfterMs?: number }
  | { kind: 'permanent'; reasonClass: string }
  | { kind: 'unknown'; reasonClass: string };

/** A send's result class, as the segment-send metric reports it: a provider's flood control apart. */
export type SendResultClass = 'sent' | 'retryable' | 'rate_limited' | 'unknown' | 'failed';

export function sendResultClass(result: SendResult): SendResultClass {
  switch (result.kind) {
    case 'sent':
      return 'sent';
    case 'retryable':
      // Telegram's 429 and WeCom's 45009 (both with a retry delay); other throttles stay retryable.
      return result.reasonClass === 'rate_limited' ? 'rate_limited' : 'retryable';
    case 'permanent':
      return 'failed';
    case 'unknown':
      return 'unknown';
    default: {
      const exhaustive: never = result;
      return exhaustive;
    }
  }
}

/**
 * The result of a send the egress layer refused, could not make, saw redirected or found answered
 * with a body over the cap; undefined for any other failure. Unavailable means nothing was sent (a
 * DNS hiccup, no connection), so it is retried and never `unknown`; a denial or a redirect will not
 * change by retrying. A body over the cap came back from a peer that received the send, so the
 * send may have been applied: `unknown`, never `failed` or retried blindly.
 */
export function egressSendFailure(err: unknown): SendResult | undefined {
  if (err instanceof EgressDeniedError) return { kind: 'permanent', reasonClass: 'egress_denied' };
  if (err instanceof EgressRedirectError) return { kind: 'permanent', reasonClass: 'redirect_refused' };
  if (err instanceof EgressUnavailableError) return { kind: 'retryable', reasonClass: 'egress_unavailable' };
  if (err instanceof EgressBodyTooLargeError) return { kind: 'unknown', reasonClass: 'response_too_large' };
  return undefined;
}
