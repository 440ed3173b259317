import { z } from 'zod';
import type { InboundMessage } from '../inbound';
import { cleanFileName, type MediaDescriptor } from '../media';

// The part of the Bot API `Update` object that ingress consumes. Unknown fields are allowed
// (Telegram adds fields over time); what we rely on is validated.
const chatSchema = z.object({
  id: z.number().int(),
  type: z.enum(['private', 'group', 'supergroup', 'channel']),
});

// A file the Bot API describes: fetched later with getFile (activities/media-in.ts).
const fileSchema = z.object({
  file_id: z.string().min(1).max(512),
  file_size: z.number().int().min(0).optional(),
  mime_type: z.string().max(200).optional(),
  file_name: z.string().max(1000).optional(),
});

const messageSchema = z.object({
  message_id: z.number().int(),
  // Seconds a JS Date can hold (±8.64e12 s would overflow toISOString()).
  date: z.number().int().min(0).max(8_640_000_000),
  chat: chatSchema,
  from: z.object({ id: z.number().int(), is_bot: z.boolean().optional() }).optional(),
  message_thread_id: z.number().int().optional(),
  is_topic_message: z.boolean().optional(),
  text: z.string().optional(),
  caption: z.string().optional(),
  /** Sizes of one photo, smallest first. */
  photo: z.array(fileSchema).max(20).optional(),
  document: fileSchema.optional(),
  voice: fileSchema.optional(),
  video: fileSchema.optional(),
});

export const updateSchema = z.object({
  update_id: z.number().int(),
  message: messageSchema.optional(),
  edited_message: messageSchema.optional(),
});

export type TelegramUpdate = z.infer<typeof updateSchema>;

/**
 * Normalizes an Update. Only `message` executes; `edited_message` and other update kinds are
 * returned as null (acknowledged, not recorded). The message identity is chat id + message id:
 * Telegram's message_id is unique per chat, while update_id may jump after long silences.
 */
export function normalizeTelegramUpdate(update: TelegramUpdate): InboundMessage | null {
  const m = update.message;
  if (!m) return null;
  const chatType = m.chat.type === 'private' ? 'direct' : 'group';
  const text = m.text?.trim();
  const media = text ? [] : mediaOf(m);
  const caption = m.caption?.trim() || null;
  const threadId =
    m.is_topic_message && m.message_thread_id !== undefined ? String(m.message_thread_id) : null;
  return {
    channel: 'telegram',
    externalMessageId: `${m.chat.id}:${m.message_id}`,
    kind: text ? 'text' : media.length > 0 ? 'media' : 'unsupported',
    text: text ? text : null,
    ...(media.length > 0 ? { caption, media } : {}),
    platformType: text ? 'text' : (media[0]?.platformType ?? 'non_text'),
    senderId: String(m.from?.id ?? m.chat.id),
    chatId: String(m.chat.id),
    chatType,
    threadId,
    sentAt: new Date(m.date * 1000).toISOString(),
  };
}

/**
 * The attachment of a message (a Bot API message carries at most one): the largest size of a
 * photo, a document, a voice note or a video. Stickers, locations and the rest stay unsupported.
 */
function mediaOf(m: z.infer<typeof messageSchema>): MediaDescriptor[] {
  const one = (
    kind: MediaDescriptor['kind'],
    platformType: string,
    f: z.infer<typeof fileSchema>,
    defaultMime: string | null,
  ): MediaDescriptor[] => [
    {
      kind,
      platformType,
      fileId: f.file_id,
      sizeBytes: f.file_size ?? null,
      mimeType: f.mime_type ?? defaultMime,
      fileName: cleanFileName(f.file_name),
    },
  ];
  const largest = m.photo?.at(-1);
  if (largest) return one('image', 'photo', largest, 'image/jpeg');
  // A picture sent as a file keeps its bytes uncompressed; it is still a picture.
  if (m.document)
    return one(m.document.mime_type?.startsWith('image/') ? 'image' : 'file', 'document', m.document, null);
  if (m.voice) return one('audio', 'voice', m.voice, 'audio/ogg');
  if (m.video) return one('video', 'video', m.video, 'video/mp4');
  return [];
}
