/**
 * The outcome of one outbound send, as the delivery activity needs it. `unknown` means the
 * request may have been applied (timeout after it left, connection dropped mid-response).
 */
export type SendResult =
  | { kind: 'sent'; providerMessageId: string }
  | { kind: 'retryable'; reasonClass: string; retryAfterMs?: number }
  | { kind: 'permanent'; reasonClass: string }
  | { kind: 'unknown'; reasonClass: string };
