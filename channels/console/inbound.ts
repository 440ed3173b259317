import type { InboundMessage, SessionIdentity } from '../inbound';
import type { MediaDescriptor } from '../media';

// A console message in channel-neutral form. The conversation is the chat and the session: one
// lane per (binding, conversation), whoever of the tenant's operators writes in it (the sender is
// the signed-in principal). Written as a group chat so that the session is keyed by the chat alone.

export interface ConsoleMessageInput {
  conversationId: string;
  /** `console:<api key id>` or `console:platform` */
  senderId: string;
  /** The text, or a media message's caption ('' for none). */
  text: string;
  /** Uploads, already stored as artifacts (api/admin/console-media.ts); none: a text message. */
  media?: MediaDescriptor[];
  /** The client's id of the message (its retries are one message), or null: a new message. */
  clientMessageId: string | null;
  /** A fresh id, used when the client gave none. */
  generatedId: string;
  sentAt: Date;
}

/** A console message in the form ingress records (a media message when it carries uploads). */
export function consoleInboundMessage(m: ConsoleMessageInput): InboundMessage {
  const text = m.text.trim();
  const media = m.media ?? [];
  return {
    channel: 'console',
    externalMessageId: consoleExternalId(m),
    ...(media.length > 0
      ? { kind: 'media', text: null, caption: text === '' ? null : text, media, platformType: 'upload' }
      : { kind: 'text', text, platformType: 'text' }),
    senderId: m.senderId,
    chatId: m.conversationId,
    chatType: 'group',
    threadId: null,
    sentAt: m.sentAt.toISOString(),
  };
}

/**
 * The external message id is unique per binding (the ingress duplicate key): a client's id is
 * scoped by its conversation, and generated ids cannot collide with a client's (other prefix).
 */
export function consoleExternalId(
  m: Pick<ConsoleMessageInput, 'conversationId' | 'clientMessageId' | 'generatedId'>,
): string {
  return m.clientMessageId === null ? `g:${m.generatedId}` : `c:${m.conversationId}:${m.clientMessageId}`;
}

/** The session identity of a conversation: what sessionIdentityOf gives for its messages. */
export function consoleSessionIdentity(conversationId: string): SessionIdentity {
  return { kind: 'group', externalUserId: null, externalChatId: conversationId, externalThreadId: null };
}
