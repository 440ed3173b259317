import type postgres from 'postgres';

/**
 * A jsonb parameter for a tagged query: `${jsonb(tx, value)}`. postgres.js types `sql.json` with its
 * own JSONValue, which an interface or a `Record<string, unknown>` does not satisfy though it
 * serializes the same way; this is the one place that widens them (a bigint or a cycle still fails
 * at run time, in JSON.stringify), instead of a cast at every call.
 */
export function jsonb(
  sql: { json(value: postgres.JSONValue): postgres.Parameter },
  value: object | null,
): postgres.Parameter {
  return sql.json(value as postgres.JSONValue);
}
