// The file side of the Telegram and WeCom fakes (test fixture only), speaking their wire
// protocols: Telegram getFile + `GET /file/bot<token>/<file_path>` and sendPhoto / sendDocument
// (multipart); WeCom `media/get` and `media/upload` (multipart, field `media`). Each fake calls
// `handle` before it reads a body as text, so binary bodies arrive intact.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from './http';

export interface MultipartPart {
  name: string;
  fileName: string | null;
  contentType: string | null;
  data: Buffer;
}

/** A multipart/form-data body split into its parts (enough for what the clients send). */
export function parseMultipart(contentType: string, body: Buffer): MultipartPart[] | null {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary) return null;
  const delim = Buffer.from(`--${boundary}`);
  const parts: MultipartPart[] = [];
  let pos = body.indexOf(delim);
  while (pos !== -1) {
    const start = pos + delim.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delim, start);
    if (next === -1) return null;
    const chunk = body.subarray(start + 2, next - 2); // strip CRLF after delimiter and before next
    const headerEnd = chunk.indexOf('\r\n\r\n');
    if (headerEnd === -1) return null;
    const headers = chunk.subarray(0, headerEnd).toString('utf8');
    const name = /name="([^"]*)"/i.exec(headers)?.[1] ?? '';
    const fileName = /filename="([^"]*)"/i.exec(headers)?.[1] ?? null;
    const type = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1]?.trim() ?? null;
    parts.push({ name, fileName, contentType: type, data: Buffer.from(chunk.subarray(headerEnd + 4)) });
    pos = next;
  }
  return parts;
}

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function sendBytes(
  res: ServerResponse,
  status: number,
  bytes: Buffer,
  headers: Record<string, string>,
): void {
  res.writeHead(status, { 'content-length': String(bytes.length), ...headers });
  res.end(bytes);
}

export interface TelegramFile {
  fileId: string;
  bytes: Buffer;
  filePath: string;
  /** getFile answers this file_size (a lie, to test the check of the real bytes); default the real size */
  declaredSize?: number;
  /** getFile refuses the file with this description (e.g. "Bad Request: file is too big") */
  refuse?: string;
}

export interface TelegramMediaSent {
  token: string;
  method: 'sendPhoto' | 'sendDocument';
  chatId: string;
  caption: string | undefined;
  fileName: string | null;
  contentType: string | null;
  bytes: Buffer;
  messageId: number;
  at: number;
}

export function telegramFiles(isBot: (token: string) => boolean) {
  const files = new Map<string, TelegramFile>();
  const mediaSent: TelegramMediaSent[] = [];
  const downloads: string[] = [];
  let nextId = 10_000;
  return {
    files,
    mediaSent,
    /** file paths downloaded, in order */
    downloads,
    addFile(f: Omit<TelegramFile, 'filePath'> & { filePath?: string }) {
      files.set(f.fileId, { filePath: `files/${f.fileId}.bin`, ...f });
    },
    /** true when the request was one of the file routes (and was answered) */
    async handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
      const url = new URL(req.url ?? '/', 'http://fake');
      const download = /^\/file\/bot([^/]+)\/(.+)$/.exec(url.pathname);
      if (download) {
        const [, token, path] = download;
        const file = [...files.values()].find((f) => f.filePath === path);
        if (!isBot(token!)) sendJson(res, 401, { ok: false, error_code: 401, description: 'Unauthorized' });
        else if (!file) sendJson(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
        else {
          downloads.push(path!);
          sendBytes(res, 200, file.bytes, { 'content-type': 'application/octet-stream' });
        }
        return true;
      }
      const m = /^\/bot([^/]+)\/(getFile|sendPhoto|sendDocument)$/i.exec(url.pathname);
      if (!m) return false;
      const token = m[1]!;
      const method = m[2]!.toLowerCase();
      const raw = await readRaw(req);
      if (!isBot(token)) {
        sendJson(res, 401, { ok: false, error_code: 401, description: 'Unauthorized' });
        return true;
      }
      if (method === 'getfile') {
        const fileId = (() => {
          try {
            return String((JSON.parse(raw.toString('utf8')) as { file_id?: unknown }).file_id ?? '');
          } catch {
            return '';
          }
        })();
        const file = files.get(fileId);
        if (!file)
          sendJson(res, 400, { ok: false, error_code: 400, description: 'Bad Request: invalid file_id' });
        else if (file.refuse) sendJson(res, 400, { ok: false, error_code: 400, description: file.refuse });
        else
          sendJson(res, 200, {
            ok: true,
            result: {
              file_id: file.fileId,
              file_unique_id: `u${file.fileId}`,
              file_size: file.declaredSize ?? file.bytes.length,
              file_path: file.filePath,
            },
          });
        return true;
      }
      const parts = parseMultipart(String(req.headers['content-type'] ?? ''), raw);
      const field = method === 'sendphoto' ? 'photo' : 'document';
      const file = parts?.find((p) => p.name === field && p.fileName !== null);
      const chatId = parts?.find((p) => p.name === 'chat_id')?.data.toString('utf8');
      if (!parts || !file || !chatId) {
        sendJson(res, 400, {
          ok: false,
          error_code: 400,
          description: `Bad Request: there is no ${field} in the request`,
        });
        return true;
      }
      const messageId = ++nextId;
      const at = Date.now();
      const caption = parts.find((p) => p.name === 'caption')?.data.toString('utf8');
      mediaSent.push({
        token,
        method: method === 'sendphoto' ? 'sendPhoto' : 'sendDocument',
        chatId,
        caption,
        fileName: file.fileName,
        contentType: file.contentType,
        bytes: file.data,
        messageId,
        at,
      });
      sendJson(res, 200, {
        ok: true,
        result: {
          message_id: messageId,
          date: Math.floor(at / 1000),
          chat: { id: Number(chatId), type: 'private', first_name: 'User' },
          ...(method === 'sendphoto'
            ? { photo: [{ file_id: `p${messageId}`, file_unique_id: `up${messageId}`, width: 1, height: 1 }] }
            : { document: { file_id: `d${messageId}`, file_unique_id: `ud${messageId}` } }),
          ...(caption ? { caption } : {}),
        },
      });
      return true;
    },
  };
}

export interface WecomMedia {
  mediaId: string;
  bytes: Buffer;
  contentType: string;
  fileName?: string;
  /** media/get answers this errcode instead (e.g. 40007 invalid media_id) */
  errcode?: number;
}

export function wecomFiles(tokenOk: (url: URL) => boolean) {
  const media = new Map<string, WecomMedia>();
  const uploads: {
    mediaId: string;
    type: string;
    fileName: string | null;
    contentType: string | null;
    bytes: Buffer;
  }[] = [];
  return {
    media,
    uploads,
    addMedia(m: WecomMedia) {
      media.set(m.mediaId, m);
    },
    async handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
      const url = new URL(req.url ?? '/', 'http://fake');
      const path = url.pathname.replace(/\/+$/, '');
      if (path !== '/cgi-bin/media/get' && path !== '/cgi-bin/media/upload') return false;
      const raw = await readRaw(req);
      if (!tokenOk(url)) {
        sendJson(res, 200, { errcode: 40014, errmsg: 'invalid access_token' });
        return true;
      }
      if (path === '/cgi-bin/media/get') {
        const m = media.get(url.searchParams.get('media_id') ?? '');
        if (!m) sendJson(res, 200, { errcode: 40007, errmsg: 'invalid media_id' });
        else if (m.errcode) sendJson(res, 200, { errcode: m.errcode, errmsg: 'refused' });
        else
          sendBytes(res, 200, m.bytes, {
            'content-type': m.contentType,
            ...(m.fileName ? { 'content-disposition': `attachment; filename="${m.fileName}"` } : {}),
          });
        return true;
      }
      const file = parseMultipart(String(req.headers['content-type'] ?? ''), raw)?.find(
        (p) => p.name === 'media',
      );
      const type = url.searchParams.get('type') ?? '';
      if (!file || !['image', 'voice', 'video', 'file'].includes(type)) {
        sendJson(res, 200, { errcode: 40004, errmsg: 'invalid media type' });
        return true;
      }
      const mediaId = `up_${randomBytes(8).toString('hex')}`;
      uploads.push({
        mediaId,
        type,
        fileName: file.fileName,
        contentType: file.contentType,
        bytes: file.data,
      });
      sendJson(res, 200, {
        errcode: 0,
        errmsg: 'ok',
        type,
        media_id: mediaId,
        created_at: String(Math.floor(Date.now() / 1000)),
      });
      return true;
    },
  };
}
