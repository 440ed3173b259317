import { createHash, timingSafeEqual } from 'node:crypto';

export function sha256Hex(input: string | Uint8Array): string {
  return createHash('sha256').update(input).digest('hex');
}

/** Constant-time string comparison; different lengths compare unequal without early exit on content. */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

/**
 * Length-prefixed encoding of a tuple: `len:value|len:value…`. Unlike plain concatenation, no two
 * distinct tuples encode the same way (seeds: idempotency key and session identity).
 */
export function encodeTuple(parts: readonly string[]): string {
  return parts.map((p) => `${Buffer.byteLength(p, 'utf8')}:${p}`).join('|');
}

/** Canonical JSON: object keys sorted recursively, no whitespace; the input of every content_digest. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function contentDigest(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
