import type { Message } from '@grammyjs/types';
import { egressFetch } from '../../lib/egress';
import { CHANNEL_MAX_RESPONSE_BYTES, egressSendFailure, type SendResult } from '../send-result';

export const TELEGRAM_API_BASE = 'https://api.telegram.org';

/** A Bot API method's URL (the token is in the path, so this URL is never logged). */
export function botApiUrl(apiBaseUrl: string, botToken: string, method: string): string {
  return `${apiBaseUrl.replace(/\/+$/, '')}/bot${botToken}/${method}`;
}

export interface TelegramSendInput {
  apiBaseUrl: string;
  botToken: string;
  chatId: string;
  threadId: string | null;
  text: string;
  timeoutMs: number;
}

interface BotApiResponse {
  ok: boolean;
  result?: Message.TextMessage;
  error_code?: number;
  description?: string;
  parameters?: { retry_after?: number };
}

/** Calls Bot API sendMessage and classifies the outcome; never throws, never returns the token. */
export async function telegramSendMessage(input: TelegramSendInput): Promise<SendResult> {
  const url = botApiUrl(input.apiBaseUrl, input.botToken, 'sendMessage');
  const body: Record<string, unknown> = { chat_id: input.chatId, text: input.text };
  if (input.threadId !== null) body.message_thread_id = Number(input.threadId);
  let res: Response;
  try {
    res = await egressFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
  } catch (err) {
    return classifyNetworkError(err);
  }
  let json: BotApiResponse;
  try {
    json = (await res.json()) as BotApiResponse;
  } catch (err) {
    // An answer over the cap came from a peer that got the send: unknown, whatever its status.
    const egress = egressSendFailure(err);
    if (egress) return egress;
    // Headers arrived but the body did not: the message may have been accepted.
    return res.ok
      ? { kind: 'unknown', reasonClass: 'response_truncated' }
      : { kind: 'retryable', reasonClass: `http_${res.status}` };
  }
  if (json.ok && json.result) return { kind: 'sent', providerMessageId: String(json.result.message_id) };
  return classifyBotApiError(res.status, json);
}

export function classifyBotApiError(status: number, json: BotApiResponse): SendResult {
  const code = json.error_code ?? status;
  const description = (json.description ?? '').toLowerCase();
  if (code === 429) {
    const retryAfter = json.parameters?.retry_after ?? 1;
    return { kind: 'retryable', reasonClass: 'rate_limited', retryAfterMs: retryAfter * 1000 };
  }
  if (code >= 500) return { kind: 'retryable', reasonClass: `http_${code}` };
  if (code === 401 || code === 404) return { kind: 'permanent', reasonClass: 'invalid_token' };
  if (code === 403)
    return { kind: 'permanent', reasonClass: description.includes('blocked') ? 'bot_blocked' : 'forbidden' };
  if (description.includes('chat not found')) return { kind: 'permanent', reasonClass: 'chat_not_found' };
  if (description.includes('message is too long'))
    return { kind: 'permanent', reasonClass: 'message_too_long' };
  return { kind: 'permanent', reasonClass: `bad_request_${code}` };
}

/**
 * Nothing was sent when the egress layer says so (no address, no connection, the deadline passed
 * before connecting): safe to retry. A timeout or reset after the request was written, or an answer
 * over the cap, may have been applied, and Telegram offers no idempotency key or read-back.
 */
export function classifyNetworkError(err: unknown): SendResult {
  const egress = egressSendFailure(err);
  if (egress) return egress;
  const e = err as { name?: string };
  if (e.name === 'TimeoutError' || e.name === 'AbortError')
    return { kind: 'unknown', reasonClass: 'timeout' };
  return { kind: 'unknown', reasonClass: 'connection_dropped' };
}

export interface TelegramChatActionInput {
  apiBaseUrl: string;
  botToken: string;
  chatId: string;
  threadId: string | null;
  /** Bot API chat action, e.g. `typing` */
  action: 'typing';
  timeoutMs: number;
}

/**
 * Bot API sendChatAction (the "typing…" indicator, shown for about 5 s or until the bot's next
 * message). Best effort: true when Telegram accepted it; never throws, never returns the token.
 */
export async function telegramSendChatAction(input: TelegramChatActionInput): Promise<boolean> {
  const url = botApiUrl(input.apiBaseUrl, input.botToken, 'sendChatAction');
  const body: Record<string, unknown> = { chat_id: input.chatId, action: input.action };
  if (input.threadId !== null) body.message_thread_id = Number(input.threadId);
  try {
    const res = await egressFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
    const json = (await res.json()) as { ok?: boolean };
    return res.ok && json.ok === true;
  } catch {
    return false;
  }
}

export interface TelegramEditInput {
  apiBaseUrl: string;
  botToken: string;
  chatId: string;
  messageId: string;
  text: string;
  timeoutMs: number;
}

/**
 * The outcome of an editMessageText (a live draft). An edit is idempotent — repeating it gives
 * "message is not modified", which is success — so an outcome that cannot be confirmed (a timeout,
 * a dropped connection) is retryable, never unknown. `refused`: Telegram will not edit this message
 * (it is gone, too old, not the bot's…), so the text has to be sent as a new message instead.
 */
export type EditResult =
  | { kind: 'edited' }
  | { kind: 'refused'; reasonClass: string }
  | { kind: 'retryable'; reasonClass: string; retryAfterMs?: number }
  | { kind: 'permanent'; reasonClass: string };

/** Bot API editMessageText; never throws, never returns the token. */
export async function telegramEditMessageText(input: TelegramEditInput): Promise<EditResult> {
  const url = botApiUrl(input.apiBaseUrl, input.botToken, 'editMessageText');
  const body = { chat_id: input.chatId, message_id: Number(input.messageId), text: input.text };
  let res: Response;
  let json: BotApiResponse;
  try {
    res = await egressFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
    json = (await res.json()) as BotApiResponse;
  } catch (err) {
    const egress = egressSendFailure(err);
    if (egress?.kind === 'permanent') return egress;
    return {
      kind: 'retryable',
      reasonClass: egress && egress.kind !== 'sent' ? egress.reasonClass : 'edit_unconfirmed',
    };
  }
  if (json.ok) return { kind: 'edited' };
  const description = (json.description ?? '').toLowerCase();
  // The message already shows exactly this text (an earlier attempt's edit landed).
  if (description.includes('message is not modified')) return { kind: 'edited' };
  const sent = classifyBotApiError(res.status, json);
  switch (sent.kind) {
    case 'retryable':
      return sent;
    case 'permanent':
      // The bot or the chat cannot be reached at all: a new message would be refused the same way.
      if (['invalid_token', 'bot_blocked', 'forbidden', 'chat_not_found'].includes(sent.reasonClass))
        return sent;
      return { kind: 'refused', reasonClass: editRefusal(description) };
    default:
      return { kind: 'refused', reasonClass: 'edit_refused' };
  }
}

function editRefusal(description: string): string {
  if (description.includes('message to edit not found')) return 'draft_not_found';
  if (description.includes("can't be edited")) return 'draft_not_editable';
  return 'edit_refused';
}

/** Bot API deleteMessage, best effort (a live draft no reply needs): true when it was deleted. */
export async function telegramDeleteMessage(input: {
  apiBaseUrl: string;
  botToken: string;
  chatId: string;
  messageId: string;
  timeoutMs: number;
}): Promise<boolean> {
  const url = botApiUrl(input.apiBaseUrl, input.botToken, 'deleteMessage');
  try {
    const res = await egressFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chat_id: input.chatId, message_id: Number(input.messageId) }),
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
    const json = (await res.json()) as { ok?: boolean };
    return res.ok && json.ok === true;
  } catch {
    return false;
  }
}
