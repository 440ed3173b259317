import { customType } from 'drizzle-orm/pg-core';
import { type CheckPattern, inSql, matchesSql, notBlankSql, runtimeIdPattern } from './columns';

// Single-column rules of the tables a message, a tool call or a live draft writes, as PostgreSQL
// domains instead of table CHECKs (migration 0049). PostgreSQL re-reads every CHECK of a table from
// its stored node text and plans it again for each INSERT or UPDATE statement, and an UPDATE checks
// them all whatever it assigns: a one-column UPDATE on a copy of message_event took ~240 µs with its
// 17 CHECKs and ~80 µs with none (a loop of 20,000 UPDATEs, timed once). A domain's checks stay
// parsed in the type cache, and an UPDATE checks only the columns it assigns: the same loop with
// these domains (the multi-column CHECKs kept) took ~120 µs.
// Each domain is a column's former CHECK under that CHECK's name (`<domain>_check`), so a violation
// still names the same constraint (SQLSTATE 23514, worded "value for domain …", without a
// table_name) — except the audit entry's shared columns: audit_log and audit_pending have one
// domain each (`audit_entry_*`, db/schema/audit-log.ts), since their rules are one by design.
// Rules over several columns, and jsonb shapes, stay table CHECKs: a jsonb domain would make
// postgres.js send a plain object parameter as "[object Object]" (it serializes by the type
// PostgreSQL reports for an INSERT or SET parameter, and a domain's is not jsonb's). Results are
// unaffected (PostgreSQL reports a domain column as its base type), except arrays built from one
// (`array_agg(status)` is a `message_event_status[]`, which postgres.js returns as strings): cast
// the column first. The other tables keep their CHECKs for now; some of them are written per
// message too (rate_limit_window, execution_permit, ingress_replay_guard) but have one or two.

export type DomainBase = 'text' | 'integer' | 'bigint';

/** One domain: `CREATE DOMAIN <name> AS <base> CONSTRAINT <name>_check CHECK (<check>)`. */
export interface ColumnDomain {
  readonly name: string;
  readonly base: DomainBase;
  /** The condition over VALUE; NULL passes, as it passed the CHECK (NOT NULL stays on the column). */
  readonly check: string;
}

const declared = new Map<string, ColumnDomain>();

/** Every domain the schema's columns use, in declaration order (column-domains.test.ts holds the database to it). */
export function columnDomains(): ColumnDomain[] {
  return [...declared.values()];
}

/** A column builder typed by the domain `name`, which is registered for the schema test. */
function domain<T>(name: string, base: DomainBase, check: string) {
  if (declared.has(name)) throw new Error(`domain ${name} declared twice`);
  declared.set(name, { name, base, check });
  return customType<{ data: T; driverData: T }>({
    dataType: () => name,
    ...(base === 'bigint' ? { fromDriver: (v: unknown) => Number(v) as T } : {}),
  });
}

/** Text matching a CHECK pattern (columns.ts). */
export const matchesDomain = (name: string, p: CheckPattern) =>
  domain<string>(name, 'text', matchesSql('VALUE', p));

/** A runtime id with its type prefix (columns.ts runtimeIdPattern). */
export const runtimeIdDomain = (name: string, prefix: string) =>
  matchesDomain(name, runtimeIdPattern(prefix));

/** Text that is not blank and at most `max` characters once trimmed. */
export const notBlankDomain = (name: string, max: number) =>
  domain<string>(name, 'text', notBlankSql('VALUE', max));

/** Text of 1..`max` characters. */
export const lengthDomain = (name: string, max: number) =>
  domain<string>(name, 'text', `length(VALUE) BETWEEN 1 AND ${max}`);

/** One of a closed TypeScript union. */
export const inDomain = <T extends string>(name: string, values: readonly T[]) =>
  domain<T>(name, 'text', inSql('VALUE', values));

/** A count or token that never goes below `min` (0 or 1). */
export const atLeastDomain = (name: string, base: 'integer' | 'bigint', min: 0 | 1) =>
  domain<number>(name, base, `VALUE >= ${min}`);
