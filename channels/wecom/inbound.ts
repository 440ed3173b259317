import { encodeTuple, sha256Hex } from '../../lib/digest';
import type { InboundMessage } from '../inbound';
import type { WecomInnerMessage } from './xml';

export type WecomNormalizeResult =
  | { ok: true; message: InboundMessage }
  | { ok: false; reason: 'bad_create_time' };

/** Latest instant a JS Date can represent, in seconds (±8.64e15 ms). */
const MAX_DATE_SECONDS = 8.64e12;

/**
 * Normalizes a verified, decrypted WeCom callback message.
 *
 * - `text` with non-blank content → kind 'text' (trimmed).
 * - every other MsgType (image, voice, video, file, location, link…), blank text, and events
 *   (MsgType `event`, platformType `event:<Event>`) → kind 'unsupported': recorded and acknowledged,
 *   and the workflow ends them without execution.
 * - identity: `MsgId` when present (an exact decimal string). Events carry none, so their id is a
 *   digest of (MsgType, FromUserName, CreateTime, Event): a provider retry of the same event maps
 *   to the same id, and the prefix keeps it disjoint from any MsgId.
 * - conversation: `ChatId` present → group (session = binding + chat), else direct with the sender
 *   as chat (session = binding + user). WeCom app callbacks have no threads.
 */
export function normalizeWecomMessage(m: WecomInnerMessage): WecomNormalizeResult {
  const seconds = Number(m.createTime); // xml.ts guarantees 1..20 decimal digits
  if (!Number.isSafeInteger(seconds) || seconds > MAX_DATE_SECONDS)
    return { ok: false, reason: 'bad_create_time' };

  const isEvent = m.msgType === 'event';
  const text = m.msgType === 'text' ? (m.content ?? '').trim() : '';
  const platformType = isEvent ? `event:${m.event ?? 'unknown'}` : m.msgType;
  const externalMessageId =
    m.msgId ??
    `digest:${sha256Hex(encodeTuple(['wecom-no-msgid', m.msgType, m.fromUser, m.createTime, m.event ?? '']))}`;
  const group = m.chatId !== undefined;
  return {
    ok: true,
    message: {
      channel: 'wecom',
      externalMessageId,
      kind: text ? 'text' : 'unsupported',
      text: text ? text : null,
      platformType: m.msgType === 'text' && !text ? 'text:empty' : platformType,
      senderId: m.fromUser,
      chatId: group ? m.chatId! : m.fromUser,
      chatType: group ? 'group' : 'direct',
      threadId: null,
      sentAt: new Date(seconds * 1000).toISOString(),
    },
  };
}
