import { EgressBodyTooLargeError, egressFetch } from '../../lib/egress';
import { type MediaFetch, multipartBody } from '../multipart';
import { CHANNEL_MAX_RESPONSE_BYTES, egressSendFailure, type SendResult } from '../send-result';
import { classifyBotApiError, classifyNetworkError } from './client';

// The Bot API's file side: getFile + the file download for inbound media, sendPhoto /
// sendDocument (multipart upload) for reply attachments. Errors name no token or URL.

const base = (apiBaseUrl: string) => apiBaseUrl.replace(/\/+$/, '');

/** file_path as getFile returns it (`photos/file_1.jpg`): plain segments, nothing to reinterpret. */
const FILE_PATH = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,200}(\/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,200}){0,4}$/;

/** getFile, then `GET {base}/file/bot{token}/{file_path}`, read with the caller's cap. */
export async function telegramDownloadFile(input: {
  apiBaseUrl: string;
  botToken: string;
  fileId: string;
  maxBytes: number;
  timeoutMs: number;
}): Promise<MediaFetch> {
  let info: {
    ok?: boolean;
    result?: { file_path?: string; file_size?: number };
    description?: string;
    error_code?: number;
  };
  try {
    const res = await egressFetch(`${base(input.apiBaseUrl)}/bot${input.botToken}/getFile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ file_id: input.fileId }),
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
    info = (await res.json()) as typeof info;
    if (!info.ok) {
      const code = info.error_code ?? res.status;
      if (code === 429 || code >= 500) return { kind: 'unavailable', reasonClass: `http_${code}` };
      // Telegram's file API serves at most 20 MB: "Bad Request: file is too big".
      if ((info.description ?? '').toLowerCase().includes('too big')) return { kind: 'too_large' };
      return {
        kind: 'refused',
        reasonClass: code === 401 || code === 404 ? 'invalid_token' : 'file_refused',
      };
    }
  } catch (err) {
    return unavailable(err);
  }
  const path = info.result?.file_path;
  if (!path || !FILE_PATH.test(path) || path.split('/').some((s) => s === '..' || s === '.'))
    return { kind: 'refused', reasonClass: 'bad_file_path' };
  if ((info.result?.file_size ?? 0) > input.maxBytes) return { kind: 'too_large' };
  try {
    const res = await egressFetch(`${base(input.apiBaseUrl)}/file/bot${input.botToken}/${path}`, {
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: input.maxBytes,
    });
    if (res.status >= 500 || res.status === 429) {
      await res.body?.cancel().catch(() => undefined);
      return { kind: 'unavailable', reasonClass: `http_${res.status}` };
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      return { kind: 'refused', reasonClass: `http_${res.status}` };
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    const name = path.split('/').at(-1) ?? null;
    return { kind: 'ok', bytes, contentType: res.headers.get('content-type'), fileName: name };
  } catch (err) {
    return unavailable(err);
  }
}

function unavailable(err: unknown): MediaFetch {
  if (err instanceof EgressBodyTooLargeError) return { kind: 'too_large' };
  const egress = egressSendFailure(err);
  if (egress?.kind === 'permanent') return { kind: 'refused', reasonClass: egress.reasonClass };
  return {
    kind: 'unavailable',
    reasonClass: egress && egress.kind !== 'sent' ? egress.reasonClass : 'connection_failed',
  };
}

/**
 * sendPhoto (an image) or sendDocument (any file) as a multipart upload of the artifact's bytes;
 * classified like sendMessage (no idempotency key: an unknown outcome follows the binding's policy).
 */
export async function telegramSendMedia(input: {
  apiBaseUrl: string;
  botToken: string;
  chatId: string;
  threadId: string | null;
  kind: 'image' | 'file';
  bytes: Uint8Array;
  contentType: string;
  fileName: string;
  caption: string;
  timeoutMs: number;
}): Promise<SendResult> {
  const method = input.kind === 'image' ? 'sendPhoto' : 'sendDocument';
  const fields: Record<string, string> = { chat_id: input.chatId };
  if (input.threadId !== null) fields.message_thread_id = input.threadId;
  if (input.caption !== '') fields.caption = input.caption.slice(0, 1024);
  const { body, contentType } = multipartBody(fields, {
    field: input.kind === 'image' ? 'photo' : 'document',
    fileName: input.fileName,
    contentType: input.contentType,
    bytes: input.bytes,
  });
  let res: Response;
  try {
    res = await egressFetch(`${base(input.apiBaseUrl)}/bot${input.botToken}/${method}`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body,
      signal: AbortSignal.timeout(input.timeoutMs),
      maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
    });
  } catch (err) {
    return classifyNetworkError(err);
  }
  let json: { ok: boolean; result?: { message_id?: number }; error_code?: number; description?: string };
  try {
    json = (await res.json()) as typeof json;
  } catch (err) {
    const egress = egressSendFailure(err);
    if (egress) return egress;
    return res.ok
      ? { kind: 'unknown', reasonClass: 'response_truncated' }
      : { kind: 'retryable', reasonClass: `http_${res.status}` };
  }
  if (json.ok && json.result?.message_id !== undefined)
    return { kind: 'sent', providerMessageId: String(json.result.message_id) };
  return classifyBotApiError(res.status, json as never);
}
