import { EgressDeniedError, EgressRedirectError, EgressUnavailableError } from '../lib/egress';

/**
 * The outcome of one outbound send, as the delivery activity needs it. `unknown` means the
 * request may have been applied (timeout after it left, connection dropped mid-response).
 */
export type SendResult =
  | { kind: 'sent'; providerMessageId: string }
  | { kind: 'retryable'; reasonClass: string; retryAfterMs?: number }
  | { kind: 'permanent'; reasonClass: string }
  | { kind: 'unknown'; reasonClass: string };

/**
 * The result of a call the egress layer refused, could not make, or saw redirected; undefined for
 * any other failure. Unavailable means nothing was sent (a DNS hiccup, no connection), so it is
 * retried and never `unknown`; a denial or a redirect will not change by retrying.
 */
export function egressSendFailure(err: unknown): SendResult | undefined {
  if (err instanceof EgressDeniedError) return { kind: 'permanent', reasonClass: 'egress_denied' };
  if (err instanceof EgressRedirectError) return { kind: 'permanent', reasonClass: 'redirect_refused' };
  if (err instanceof EgressUnavailableError) return { kind: 'retryable', reasonClass: 'egress_unavailable' };
  return undefined;
}
