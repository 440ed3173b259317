import { ApplicationFailure } from '@temporalio/activity';
import { telegramSendMessage } from '../channels/telegram/client';

/**
 * The baseline's only activity for bench/e2e.ts: the same Bot API sendMessage call our delivery
 * makes (channels/telegram/client.ts), with none of our bookkeeping around it (no claim, lease,
 * pacing, receipt or DLQ). The bot token lives in the activity, not in the workflow history.
 */
export function bareActivities(opts: { apiBaseUrl: string; botToken: string; timeoutMs: number }) {
  return {
    async bareSendSegment(input: { chatId: string; text: string }): Promise<string> {
      const result = await telegramSendMessage({
        apiBaseUrl: opts.apiBaseUrl,
        botToken: opts.botToken,
        chatId: input.chatId,
        threadId: null,
        text: input.text,
        timeoutMs: opts.timeoutMs,
      });
      if (result.kind !== 'sent') throw ApplicationFailure.retryable(`send failed: ${result.reasonClass}`);
      return result.providerMessageId;
    },
  };
}
