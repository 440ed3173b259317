import { randomBytes } from 'node:crypto';

/**
 * A multipart/form-data body built by hand (fields, then one file), so the bytes that go out are
 * exactly these whatever fetch implementation carries them. The file name is quoted with `"`, CR
 * and LF removed (channels/media.ts cleanFileName already keeps them out).
 */
export function multipartBody(
  fields: Record<string, string>,
  file: { field: string; fileName: string; contentType: string; bytes: Uint8Array },
): { body: Buffer; contentType: string } {
  const boundary = `----switchyard${randomBytes(12).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    parts.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`),
    );
  }
  const fileName = file.fileName.replace(/["\r\n\\]/g, '_');
  parts.push(
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${fileName}"\r\n` +
        `Content-Type: ${file.contentType}\r\n\r\n`,
    ),
    Buffer.from(file.bytes),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  );
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** What downloading an inbound attachment from a channel's file API came to. */
export type MediaFetch =
  | { kind: 'ok'; bytes: Uint8Array; contentType: string | null; fileName: string | null }
  /** The platform refused (unknown file, expired, too big for its file API): not worth retrying. */
  | { kind: 'refused'; reasonClass: string }
  | { kind: 'too_large' }
  /** Nothing came back this time (network, 5xx, throttled): worth another try. */
  | { kind: 'unavailable'; reasonClass: string };
