import type { InboundMessage, SessionIdentity } from '../inbound';

// A console message in channel-neutral form. The conversation is the chat and the session: one
// lane per (binding, conversation), whoever of the tenant's operators writes in it (the sender is
// the signed-in principal). Written as a group chat so that the session is keyed by the chat alone.

export interface ConsoleMessageInput {
  conversationId: string;
  /** `console:<api key id>` or `console:platform` */
  senderId: string;
  text: string;
  /** The client's id of the message (its retries are one message), or null: a new message. */
  clientMessageId: string | null;
  /** A fresh id, used when the client gave none. */
  generatedId: string;
  sentAt: Date;
}

/**
 * The external message id is unique per binding (the ingress duplicate key): a client's id is
 * scoped by its conversation, and generated ids cannot collide with a client's (other prefix).
 */
export function consoleInboundMessage(m: ConsoleMessageInput): InboundMessage {
  return {
    channel: 'console',
    externalMessageId:
      m.clientMessageId === null ? `g:${m.generatedId}` : `c:${m.conversationId}:${m.clientMessageId}`,
    kind: 'text',
    text: m.text.trim(),
    platformType: 'text',
    senderId: m.senderId,
    chatId: m.conversationId,
    chatType: 'group',
    threadId: null,
    sentAt: m.sentAt.toISOString(),
  };
}

/** The session identity of a conversation: what sessionIdentityOf gives for its messages. */
export function consoleSessionIdentity(conversationId: string): SessionIdentity {
  return { kind: 'group', externalUserId: null, externalChatId: conversationId, externalThreadId: null };
}
