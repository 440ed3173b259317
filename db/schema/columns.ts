import { sql } from 'drizzle-orm';
import { bigint, check, customType, timestamp } from 'drizzle-orm/pg-core';

// Shared column builders and CHECK fragments for the one-file-per-table schema. CHECK bodies are
// raw SQL over constants defined here (never user input), written the way the seed DDL writes them.

/** Crockford-base32 ULID whose first character is 0-7 (a 48-bit timestamp fits). */
export const ULID_BODY = '[0-7][0-9A-HJKMNP-TV-Z]{25}';
/** Canonical machine key: 2-64 lower-case ASCII characters, letter first (seed: tenant_key). */
export const SLUG_PATTERN = '^[a-z][a-z0-9-]{1,63}$';
/** Low-cardinality machine classification such as `unknown_outcome` or `unknown_outcome:http_500`. */
export const CLASS_PATTERN = '^[a-z][a-z0-9_.:-]{0,127}$';
/** Lower-case hex SHA-256. */
export const SHA256_HEX_PATTERN = '^[0-9a-f]{64}$';

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
  check(name, sql.raw(`${column} IN (${values.map(quote).join(', ')})`));

/** `CHECK (<column> ~ '<pattern>')`; nullable columns pass when NULL (SQL CHECK semantics). */
export const checkMatches = (name: string, column: string, pattern: string) =>
  check(name, sql.raw(`${column} ~ ${quote(pattern)}`));

/** Control-plane ids minted by `newId(prefix)`: `^<prefix>_<ULID>$`. */
export const checkUlidId = (name: string, column: string, prefix: string) =>
  checkMatches(name, column, `^${prefix}_${ULID_BODY}$`);

/**
 * Runtime ids keep their type prefix but may be derived deterministically (for example from an
 * idempotency key, so that a retried activity writes the same row), hence a looser body.
 */
export const checkRuntimeId = (name: string, column: string, prefix: string) =>
  checkMatches(name, column, `^${prefix}_[0-9A-Za-z_-]{1,100}$`);

export const checkNonNegative = (name: string, column: string) => check(name, sql.raw(`${column} >= 0`));

export const checkNotBlank = (name: string, column: string, max = 1000) =>
  check(name, sql.raw(`length(btrim(${column})) BETWEEN 1 AND ${max}`));

export const checkJsonObject = (name: string, column: string) =>
  check(name, sql.raw(`jsonb_typeof(${column}) = 'object'`));

export const checkVersion = (name: string) => check(name, sql.raw('version >= 1'));
