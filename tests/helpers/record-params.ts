import type { InboundMessage } from '../../channels/inbound';
import { newId } from '../../db/ids';
import type { RecordMessageParams } from '../../db/queries/ingress';
import { sha256Hex } from '../../lib/digest';
import type { SeededTelegram } from './seed';

/**
 * What ingress passes record_inbound_message for a direct Telegram text in `chat` (the chat is the
 * session's identity: the same chat is the same session), for tests that record without a webhook.
 */
export function recordParamsOf(
  t: SeededTelegram,
  chat: string,
  externalMessageId: string,
): RecordMessageParams {
  const message: InboundMessage = {
    channel: 'telegram',
    externalMessageId,
    kind: 'text',
    text: `hello ${externalMessageId}`,
    platformType: 'text',
    senderId: chat,
    chatId: chat,
    chatType: 'direct',
    threadId: null,
    sentAt: new Date().toISOString(),
  };
  const key = sha256Hex(`${t.bindingId}/${externalMessageId}`);
  return {
    tenantId: t.tenantId,
    bindingId: t.bindingId,
    appId: t.appId,
    sessionId: newId('ses'),
    identity: { kind: 'direct', externalUserId: chat, externalChatId: chat, externalThreadId: null },
    eventId: newId('evt'),
    idempotencyKey: key,
    workflowId: `msg-${key}`,
    message,
    payloadDigest: sha256Hex(`payload ${externalMessageId}`),
    requestId: `req_${externalMessageId}`,
    traceId: null,
    outcome: null,
    rateLimitRpm: null,
  };
}
