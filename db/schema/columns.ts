import { sql } from 'drizzle-orm';
import { bigint, check, customType, timestamp } from 'drizzle-orm/pg-core';

// Shared column builders and CHECK fragments for the one-file-per-table schema. CHECK bodies are
// raw SQL over constants defined here (never user input), written the way the seed DDL writes them.

/**
 * A CHECK pattern: a regex without counted repetition plus the length bounds the repetition gave.
 * PostgreSQL's regex engine builds its DFA anew on every call, and a counted repetition unrolls
 * into that many states: `event_id ~ '^evt_[0-9A-Za-z_-]{1,100}$'` cost about 35 µs per row
 * written, `^[0-9a-f]{64}$` about 7 µs, where `~ '^…+$'` and a length test cost under 1 µs (timed
 * once in a SQL loop over 20,000 values on these 2 cores; no kept benchmark). A
 * one-segment message evaluates ~28 such checks (each UPDATE re-checks every CHECK of its table):
 * a profile put regex matching at ~6% of the backends' CPU, at most ~0.4 ms per message
 * (migration 0047).
 * Only ASCII classes: `length` then counts what the repetition counted.
 */
export interface CheckPattern {
  readonly regex: string;
  readonly minLength: number;
  readonly maxLength: number;
}

/** Canonical machine key: 2-64 lower-case ASCII characters, letter first (seed: tenant_key). */
export const SLUG_PATTERN: CheckPattern = { regex: '^[a-z][a-z0-9-]+$', minLength: 2, maxLength: 64 };
/** Low-cardinality machine classification such as `unknown_outcome` or `unknown_outcome:http_500`. */
export const CLASS_PATTERN: CheckPattern = { regex: '^[a-z][a-z0-9_.:-]*$', minLength: 1, maxLength: 128 };
/** Lower-case hex SHA-256. */
export const SHA256_HEX_PATTERN: CheckPattern = { regex: '^[0-9a-f]+$', minLength: 64, maxLength: 64 };

export const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();
export const updatedAt = () => timestamp('updated_at', { withTimezone: true }).notNull().defaultNow();
/** Optimistic-locking version; starts at 1 so that 0 never means "uninitialised" (seed). */
export const version = () => bigint('version', { mode: 'number' }).notNull().default(1);

/** AES-256-GCM ciphertext and other opaque bytes (drizzle-orm 0.45 has no built-in bytea). */
export const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => 'bytea',
});

const quote = (value: string) => `'${value.replaceAll("'", "''")}'`;

/** `CHECK (<column> IN (...))` over a closed TypeScript union. */
export const checkIn = (name: string, column: string, values: readonly string[]) =>
  check(name, sql.raw(inSql(column, values)));

/** The condition of `checkIn` (also a domain's, over VALUE: db/schema/domains.ts). */
export const inSql = (column: string, values: readonly string[]) =>
  `${column} IN (${values.map(quote).join(', ')})`;

/**
 * `CHECK (<column> ~ '<regex>' AND length(<column>) …)`; nullable columns pass when NULL (SQL CHECK
 * semantics: NULL AND NULL is NULL, which a CHECK accepts).
 */
export const checkMatches = (name: string, column: string, p: CheckPattern) =>
  check(name, sql.raw(matchesSql(column, p)));

/** The condition of `checkMatches`, unparenthesized (wrap it to combine it with others; a domain's over VALUE). */
export function matchesSql(column: string, p: CheckPattern): string {
  const length =
    p.minLength === p.maxLength
      ? `length(${column}) = ${p.minLength}`
      : `length(${column}) BETWEEN ${p.minLength} AND ${p.maxLength}`;
  return `${column} ~ ${quote(p.regex)} AND ${length}`;
}

/**
 * Control-plane ids minted by `newId(prefix)`: `<prefix>_<ULID>`, a Crockford-base32 ULID whose
 * first character is 0-7 (a 48-bit timestamp fits).
 */
export const ulidIdPattern = (prefix: string): CheckPattern => ({
  regex: `^${prefix}_[0-7][0-9A-HJKMNP-TV-Z]+$`,
  minLength: prefix.length + 27,
  maxLength: prefix.length + 27,
});

export const checkUlidId = (name: string, column: string, prefix: string) =>
  checkMatches(name, column, ulidIdPattern(prefix));

/**
 * Runtime ids keep their type prefix but may be derived deterministically (for example from an
 * idempotency key, so that a retried activity writes the same row), hence a looser body: 1-100
 * characters of [0-9A-Za-z_-].
 */
export const runtimeIdPattern = (prefix: string): CheckPattern => ({
  regex: `^${prefix}_[0-9A-Za-z_-]+$`,
  minLength: prefix.length + 2,
  maxLength: prefix.length + 101,
});

export const checkRuntimeId = (name: string, column: string, prefix: string) =>
  checkMatches(name, column, runtimeIdPattern(prefix));

export const checkNonNegative = (name: string, column: string) => check(name, sql.raw(`${column} >= 0`));

export const checkNotBlank = (name: string, column: string, max = 1000) =>
  check(name, sql.raw(notBlankSql(column, max)));

/** The condition of `checkNotBlank` (also a domain's, over VALUE). */
export const notBlankSql = (column: string, max: number) => `length(btrim(${column})) BETWEEN 1 AND ${max}`;

export const checkJsonObject = (name: string, column: string) =>
  check(name, sql.raw(`jsonb_typeof(${column}) = 'object'`));

export const checkVersion = (name: string) => check(name, sql.raw('version >= 1'));
