import type { Cursor, Page, PageParams } from '../../db/queries/admin/page';
import { fieldError } from './errors';

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 200;
const TS_KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const SEQ_KEY = /^[1-9]\d{0,15}$/;
const ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Out-of-range limits are clamped, never rejected. */
export function clampLimit(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit)) return DEFAULT_LIMIT;
  return Math.min(MAX_LIMIT, Math.max(1, Math.trunc(limit)));
}

/** Opaque to clients: base64url of the sort key and id of the last row served. */
export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.k, c.i]), 'utf8').toString('base64url');
}

/** A cursor this API did not hand out (or for another list kind) is a 400, never a 500. */
export function decodeCursor(
  raw: string | undefined,
  kind: 'timestamp' | 'seq' = 'timestamp',
): Cursor | null {
  if (raw === undefined || raw === '') return null;
  const invalid = () => fieldError('cursor', 'cursor is not a cursor returned by this list');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw invalid();
  const [k, i] = parsed as unknown[];
  if (typeof k !== 'string' || typeof i !== 'string' || !ID.test(i)) throw invalid();
  if (kind === 'seq' ? !SEQ_KEY.test(k) : !TS_KEY.test(k) || Number.isNaN(Date.parse(k))) throw invalid();
  return { k, i };
}

export function pageParams(q: { limit?: number; cursor?: string }, kind?: 'timestamp' | 'seq'): PageParams {
  return { limit: clampLimit(q.limit), cursor: decodeCursor(q.cursor, kind) };
}

export function pageBody<R, T>(
  page: Page<R>,
  map: (row: R) => T,
): { items: T[]; next_cursor: string | null } {
  return { items: page.rows.map(map), next_cursor: page.next ? encodeCursor(page.next) : null };
}
