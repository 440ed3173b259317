import { EgressBodyTooLargeError, egressFetch } from '../../lib/egress';
import type { ReplyTarget } from '../inbound';
import { cleanFileName } from '../media';
import { type MediaFetch, multipartBody } from '../multipart';
import { CHANNEL_MAX_RESPONSE_BYTES, egressSendFailure, type SendResult } from '../send-result';
import { classifyWecomErrcode, wecomSendText } from './client';
import { normalizeBase, type WecomTokenCache, wecomTokenCache } from './token-cache';

// WeCom's temporary media: `media/get` downloads what a user sent (image, voice, video, file by
// MediaId), `media/upload` stores a reply attachment for `message/send` / `appchat/send` with
// msgtype image or file. The access token comes from the shared cache; an expired one is
// refreshed once. Errors name no secret, token or URL.

const TOKEN_REJECTED = new Set([42001, 40014, 42009]);

interface Cred {
  apiBaseUrl: string;
  corpId: string;
  corpSecret: string;
  agentId: number;
  timeoutMs: number;
  tokenCache?: WecomTokenCache;
}

/** `GET {base}/cgi-bin/media/get?access_token&media_id`: the bytes, or WeCom's errcode as JSON. */
export async function wecomDownloadMedia(
  input: Cred & { mediaId: string; maxBytes: number },
): Promise<MediaFetch> {
  const cache = input.tokenCache ?? wecomTokenCache;
  let token = await cache.get(input);
  for (let attempt = 0; attempt < 2; attempt++) {
    if (!token.ok) {
      const r = 'errcode' in token ? classifyWecomErrcode(token.errcode) : token.result;
      return r.kind === 'retryable'
        ? { kind: 'unavailable', reasonClass: r.reasonClass }
        : { kind: 'refused', reasonClass: 'token_refused' };
    }
    const url = `${normalizeBase(input.apiBaseUrl)}/cgi-bin/media/get?access_token=${encodeURIComponent(token.token)}&media_id=${encodeURIComponent(input.mediaId)}`;
    let res: Response;
    try {
      res = await egressFetch(url, {
        signal: AbortSignal.timeout(input.timeoutMs),
        maxResponseBytes: input.maxBytes,
      });
    } catch (err) {
      return unavailable(err);
    }
    if (res.status >= 500 || res.status === 429) {
      await res.body?.cancel().catch(() => undefined);
      return { kind: 'unavailable', reasonClass: `http_${res.status}` };
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      return { kind: 'refused', reasonClass: `http_${res.status}` };
    }
    const type = res.headers.get('content-type') ?? '';
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await res.arrayBuffer());
    } catch (err) {
      return unavailable(err);
    }
    // An error comes back as a JSON object with errcode, never as media.
    if (/json|text\/plain/i.test(type)) {
      const errcode = errcodeOf(bytes);
      if (errcode !== null && errcode !== 0) {
        if (TOKEN_REJECTED.has(errcode) && attempt === 0) {
          token = await cache.get(input, { rejectToken: token.token });
          continue;
        }
        const r = classifyWecomErrcode(errcode);
        return r.kind === 'retryable'
          ? { kind: 'unavailable', reasonClass: r.reasonClass }
          : { kind: 'refused', reasonClass: `errcode_${errcode}` };
      }
    }
    return {
      kind: 'ok',
      bytes,
      contentType: type || null,
      fileName: fileNameOf(res.headers.get('content-disposition')),
    };
  }
  return { kind: 'unavailable', reasonClass: 'access_token_rejected' };
}

function errcodeOf(bytes: Uint8Array): number | null {
  if (bytes.byteLength > 64 * 1024) return null;
  try {
    const json = JSON.parse(Buffer.from(bytes).toString('utf8')) as { errcode?: unknown };
    return typeof json.errcode === 'number' ? json.errcode : null;
  } catch {
    return null;
  }
}

/** `attachment; filename="a.pdf"` (or filename*=UTF-8''…) → a clean name. */
function fileNameOf(disposition: string | null): string | null {
  if (!disposition) return null;
  const star = /filename\*=UTF-8''([^;]+)/i.exec(disposition);
  if (star) {
    try {
      return cleanFileName(decodeURIComponent(star[1]!));
    } catch {
      return null;
    }
  }
  const plain = /filename="?([^";]+)"?/i.exec(disposition);
  return plain ? cleanFileName(plain[1]) : null;
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
 * Uploads the attachment (media/upload, a new media_id each time: nothing was sent to the user
 * yet, so a failed or repeated upload is harmless), then sends it as an image or file message. Once
 * a send may have been applied nothing is uploaded again: see the end of the function.
 */
export async function wecomSendMedia(
  input: Cred & {
    target: ReplyTarget;
    kind: 'image' | 'file';
    bytes: Uint8Array;
    contentType: string;
    fileName: string;
    /**
     * performance.now() by which every call is over (the lease the caller holds): each call's
     * timeout is cut to it, and the image is not sent without time for the send and its resend.
     */
    deadlineMs?: number;
  },
): Promise<SendResult> {
  const cache = input.tokenCache ?? wecomTokenCache;
  const leftMs = () => (input.deadlineMs ?? Number.POSITIVE_INFINITY) - performance.now();
  const timeoutMs = () => Math.max(1, Math.min(input.timeoutMs, Math.floor(leftMs())));
  let token = await cache.get({ ...input, timeoutMs: timeoutMs() });
  let mediaId: string | null = null;
  for (let attempt = 0; attempt < 2 && mediaId === null; attempt++) {
    if (!token.ok) return 'errcode' in token ? classifyWecomErrcode(token.errcode) : token.result;
    const { body, contentType } = multipartBody(
      {},
      { field: 'media', fileName: input.fileName, contentType: input.contentType, bytes: input.bytes },
    );
    const url = `${normalizeBase(input.apiBaseUrl)}/cgi-bin/media/upload?access_token=${encodeURIComponent(token.token)}&type=${input.kind}`;
    let json: { errcode?: number; media_id?: string };
    try {
      const res = await egressFetch(url, {
        method: 'POST',
        headers: { 'content-type': contentType },
        body,
        signal: AbortSignal.timeout(timeoutMs()),
        maxResponseBytes: CHANNEL_MAX_RESPONSE_BYTES,
      });
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => undefined);
        return res.status >= 500 || res.status === 429
          ? { kind: 'retryable', reasonClass: `upload_http_${res.status}` }
          : { kind: 'permanent', reasonClass: `upload_http_${res.status}` };
      }
      json = (await res.json()) as typeof json;
    } catch (err) {
      // An upload changes nothing the user sees: whatever happened, retrying is safe.
      const egress = egressSendFailure(err);
      return egress?.kind === 'permanent' ? egress : { kind: 'retryable', reasonClass: 'upload_failed' };
    }
    if (json.errcode === 0 && typeof json.media_id === 'string' && json.media_id !== '') {
      mediaId = json.media_id;
    } else if (typeof json.errcode === 'number' && TOKEN_REJECTED.has(json.errcode) && attempt === 0) {
      token = await cache.get({ ...input, timeoutMs: timeoutMs() }, { rejectToken: token.token });
    } else {
      return typeof json.errcode === 'number'
        ? classifyWecomErrcode(json.errcode)
        : { kind: 'retryable', reasonClass: 'bad_response' };
    }
  }
  if (mediaId === null) return { kind: 'retryable', reasonClass: 'access_token_rejected' };
  // Nothing was sent yet: without room for a send and its resend, the next attempt sends.
  if (leftMs() < 2 * input.timeoutMs) return { kind: 'retryable', reasonClass: 'send_deadline' };
  const send = () =>
    wecomSendText({
      apiBaseUrl: input.apiBaseUrl,
      corpId: input.corpId,
      corpSecret: input.corpSecret,
      agentId: input.agentId,
      target: input.target,
      text: '',
      message: { msgtype: input.kind, mediaId },
      timeoutMs: timeoutMs(),
      ...(input.tokenCache ? { tokenCache: input.tokenCache } : {}),
    });
  const first = await send();
  if (!mayHaveBeenApplied(first)) return first;
  // From here on the image may be with the user, and only this media_id keeps it one image: a
  // later attempt would upload again, and a new media_id is a message WeCom's duplicate check
  // (message/send, direct chats) has not seen. So no result goes back to delivery as retryable
  // (it would upload again): a direct chat resends once with this media_id (the duplicate check
  // answers an applied one with the original msgid and delivers nothing), and what is still not
  // settled is unknown, which delivery's unknown policy parks for an attachment. Groups
  // (appchat/send) have no duplicate check: unknown at once.
  if (input.target.chatType !== 'direct') return asUnknown(first);
  const again = await send();
  return again.kind === 'sent' || again.kind === 'permanent' ? again : asUnknown(again);
}

/**
 * A send result after which WeCom may hold the message: unknown, an answer that was no WeCom
 * answer, or a 5xx (a proxy's 502/504 can follow a send WeCom applied).
 */
function mayHaveBeenApplied(r: SendResult): boolean {
  return (
    r.kind === 'unknown' ||
    (r.kind === 'retryable' && (r.reasonClass === 'bad_response' || /^http_5\d\d$/.test(r.reasonClass)))
  );
}

const asUnknown = (r: SendResult): SendResult =>
  r.kind === 'sent' || r.kind === 'permanent' ? r : { kind: 'unknown', reasonClass: r.reasonClass };
