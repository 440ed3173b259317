import { encodeTuple, sha256Hex } from '../../lib/digest';
import type { InboundMessage } from '../inbound';
import type { MediaDescriptor } from '../media';
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
 * - `image`, `voice`, `video` and `file` with a MediaId → kind 'media': the descriptor is recorded
 *   and the execution fetches the bytes with media/get (activities/media-in.ts).
 * - every other MsgType (location, link…), blank text, and events
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
  const media = mediaOf(m);
  return {
    ok: true,
    message: {
      channel: 'wecom',
      externalMessageId,
      kind: text ? 'text' : media ? 'media' : 'unsupported',
      text: text ? text : null,
      ...(media ? { caption: null, media: [media] } : {}),
      platformType: m.msgType === 'text' && !text ? 'text:empty' : platformType,
      senderId: m.fromUser,
      chatId: group ? m.chatId! : m.fromUser,
      chatType: group ? 'group' : 'direct',
      threadId: null,
      sentAt: new Date(seconds * 1000).toISOString(),
    },
  };
}

/** What media/get needs for each media MsgType, and what the bytes are by default. */
const MEDIA_TYPES: Readonly<Record<string, { kind: MediaDescriptor['kind']; mime: string | null }>> = {
  image: { kind: 'image', mime: 'image/jpeg' },
  voice: { kind: 'audio', mime: 'audio/amr' },
  video: { kind: 'video', mime: 'video/mp4' },
  file: { kind: 'file', mime: null },
};

function mediaOf(m: WecomInnerMessage): MediaDescriptor | null {
  const type = Object.hasOwn(MEDIA_TYPES, m.msgType) ? MEDIA_TYPES[m.msgType] : undefined;
  if (!type || !m.mediaId) return null;
  return {
    kind: type.kind,
    platformType: m.msgType,
    fileId: m.mediaId,
    sizeBytes: null,
    mimeType: type.mime,
    fileName: null,
  };
}
