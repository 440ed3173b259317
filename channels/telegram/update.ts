import { z } from 'zod';
import type { InboundMessage } from '../inbound';

// The part of the Bot API `Update` object that ingress consumes. Unknown fields are allowed
// (Telegram adds fields over time); what we rely on is validated.
const chatSchema = z.object({
  id: z.number().int(),
  type: z.enum(['private', 'group', 'supergroup', 'channel']),
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
  const threadId =
    m.is_topic_message && m.message_thread_id !== undefined ? String(m.message_thread_id) : null;
  return {
    channel: 'telegram',
    externalMessageId: `${m.chat.id}:${m.message_id}`,
    kind: text ? 'text' : 'unsupported',
    text: text ? text : null,
    platformType: text ? 'text' : 'non_text',
    senderId: String(m.from?.id ?? m.chat.id),
    chatId: String(m.chat.id),
    chatType,
    threadId,
    sentAt: new Date(m.date * 1000).toISOString(),
  };
}
