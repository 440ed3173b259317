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
