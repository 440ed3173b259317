import type { Channel } from '../workflows/shared';
import type { MediaDescriptor } from './media';

/** A verified inbound message in channel-neutral form: what ingress records and the agent reads. */
export interface InboundMessage {
  channel: Channel;
  /** The platform's identity of this message, unique within one binding. */
  externalMessageId: string;
  /**
   * 'text' and 'media' execute (message_event.kind 'text': a message the agent answers);
   * 'unsupported' is recorded and acknowledged only.
   */
  kind: 'text' | 'media' | 'unsupported';
  /** Trimmed text for kind 'text'; null otherwise (a media message's text is its `caption`). */
  text: string | null;
  /** Kind 'media': the trimmed caption, null when none. */
  caption?: string | null;
  /** Kind 'media': the attachments, as the platform described them (never downloaded at ingress). */
  media?: MediaDescriptor[];
  /** Platform type of an unsupported message or event (e.g. 'image', 'event:subscribe'). */
  platformType: string;
  senderId: string;
  chatId: string;
  chatType: 'direct' | 'group';
  threadId: string | null;
  sentAt: string;
}

export type SessionKind = 'direct' | 'group' | 'thread';

export interface SessionIdentity {
  kind: SessionKind;
  externalUserId: string | null;
  externalChatId: string | null;
  externalThreadId: string | null;
}

/** Seeds: direct = binding + user, group = binding + chat, thread = binding + chat + thread. */
export function sessionIdentityOf(msg: InboundMessage): SessionIdentity {
  if (msg.threadId !== null) {
    return {
      kind: 'thread',
      externalUserId: null,
      externalChatId: msg.chatId,
      externalThreadId: msg.threadId,
    };
  }
  if (msg.chatType === 'group') {
    return { kind: 'group', externalUserId: null, externalChatId: msg.chatId, externalThreadId: null };
  }
  return { kind: 'direct', externalUserId: msg.senderId, externalChatId: msg.chatId, externalThreadId: null };
}

/** Where a reply to this message goes. Stored with each outbox segment. */
export interface ReplyTarget {
  chatId: string;
  chatType: 'direct' | 'group';
  threadId: string | null;
  userId: string;
}

export function replyTargetOf(msg: InboundMessage): ReplyTarget {
  return { chatId: msg.chatId, chatType: msg.chatType, threadId: msg.threadId, userId: msg.senderId };
}
