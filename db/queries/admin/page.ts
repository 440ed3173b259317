import type { PendingQuery, Row, TransactionSql } from 'postgres';

// Keyset pagination shared by every admin list: newest first by (timestamp, id), both compared
// as a row value so equal timestamps still page deterministically. Timestamps travel in the
// cursor as text with microseconds (PostgreSQL's precision), never through a JS Date.

/** Position after which the next page starts: sort key (timestamp text or seq digits) and id. */
export interface Cursor {
  k: string;
  i: string;
}

export interface PageParams {
  limit: number;
  cursor: Cursor | null;
}

export interface Page<T> {
  rows: T[];
  next: Cursor | null;
}

type Fragment = PendingQuery<Row[]>;

/** A timestamp column rendered as the cursor's exact textual form. */
export function sortTs(tx: TransactionSql, column: string): Fragment {
  return tx`to_char(${tx(column)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/**
 * `and (ts, id) < (cursor)` — or nothing on the first page. Column names are code constants. The
 * key is bound as text and cast in SQL: bound as timestamptz, the driver would round-trip it
 * through a JS Date and drop the microseconds, skipping or repeating rows at page boundaries.
 */
export function keysetAfter(
  tx: TransactionSql,
  cursor: Cursor | null,
  tsColumn: string,
  idColumn: string,
): Fragment {
  if (!cursor) return tx``;
  return tx`and (${tx(tsColumn)}, ${tx(idColumn)}) < (${cursor.k}::text::timestamptz, ${cursor.i})`;
}

/** Rows were fetched with limit + 1: the extra row only says that another page exists. */
export function toPage<T>(rows: readonly T[], limit: number, keyOf: (row: T) => Cursor): Page<T> {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { rows: page, next: rows.length > limit && last !== undefined ? keyOf(last) : null };
}
