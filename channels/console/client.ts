import type { SendResult } from '../send-result';

// The console channel has no provider: its replies are read back from the outbox by the admin
// API (GET …/console/messages). "Sending" a console segment is recording it as sent, through the
// same claim → record state machine as any other channel (so exactly-once, order and the
// message's terminal transition hold unchanged); nothing leaves the process.

/** The provider message id a console segment is recorded with: its own id, marked as the console's. */
export function consoleReceiptId(segmentId: string): string {
  return `console:${segmentId}`;
}

/** Always sent: there is nothing to reach, so no retryable, permanent or unknown outcome exists. */
export function consoleSend(input: { segmentId: string }): SendResult {
  return { kind: 'sent', providerMessageId: consoleReceiptId(input.segmentId) };
}
