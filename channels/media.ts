import type { MediaKind } from './capabilities';

/**
 * An attachment of an inbound message as the webhook saw it: only the platform's reference and
 * what the platform declared. Nothing is downloaded at ingress (the webhook stays one statement);
 * the execution fetches, checks and stores it as an artifact (activities/media-in.ts).
 */
export interface MediaDescriptor {
  kind: MediaKind;
  /** Telegram `file_id`, WeCom `MediaId`. */
  fileId: string;
  /** What the platform declared; checked again against the bytes' size. */
  sizeBytes: number | null;
  mimeType: string | null;
  fileName: string | null;
  /** Platform type as sent (`photo`, `document`, `voice`, `video`, `image`, `file`, …). */
  platformType: string;
  /**
   * Already stored as an artifact at ingress (console uploads, whose bytes the API holds): its id,
   * the SHA-256 of its bytes and the backend profile whose store has it. The execution reads it
   * back, digest checked, instead of downloading; `fileId` is then the artifact id.
   */
  staged?: StagedArtifact;
}

export interface StagedArtifact {
  artifactId: string;
  contentDigest: string;
  backendProfileId: string;
}

/** The longest file name kept (the artifact table's bound). */
export const MAX_FILE_NAME = 255;

export function cleanFileName(name: string | undefined | null): string | null {
  if (!name) return null;
  // Path separators and control characters never reach a multipart header or a key.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  const cleaned = name.replace(/[\u0000-\u001f\u007f/\\"]/g, '_').trim();
  return cleaned === '' ? null : cleaned.slice(0, MAX_FILE_NAME);
}

/** A type as we keep it: `type/subtype` only, lower case; anything else is no type at all. */
const BARE_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;
export const bareType = (t: string | null | undefined): string | null => {
  const bare = (t ?? '').split(';')[0]!.trim().toLowerCase();
  return BARE_TYPE.test(bare) ? bare : null;
};

/** The kind of attachment a content type is (what an artifact row and the agent call it). */
export function mediaKindOf(contentType: string): MediaKind {
  if (contentType.startsWith('image/')) return 'image';
  if (contentType.startsWith('audio/')) return 'audio';
  if (contentType.startsWith('video/')) return 'video';
  return 'file';
}

/** The image type the bytes' signature says, or null when they are not a picture we know. */
export function sniffImage(bytes: Uint8Array): string | null {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 16));
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    return 'image/png';
  if (
    b.length >= 6 &&
    (b.subarray(0, 6).toString('latin1') === 'GIF87a' || b.subarray(0, 6).toString('latin1') === 'GIF89a')
  )
    return 'image/gif';
  if (
    b.length >= 12 &&
    b.subarray(0, 4).toString('latin1') === 'RIFF' &&
    b.subarray(8, 12).toString('latin1') === 'WEBP'
  )
    return 'image/webp';
  return null;
}
