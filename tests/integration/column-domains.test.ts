import { is } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import * as schema from '../../db/schema';
import { columnDomains } from '../../db/schema/domains';

// The tables a message writes keep their single-column rules as domains (db/schema/domains.ts,
// migration 0049). These tests hold the migrated database to what the TypeScript schema declares:
// the same domains with the same conditions, on the same columns, and no single-column CHECK left
// on those tables for a rule a domain could carry.

let sql: Sql;
beforeAll(() => {
  sql = postgres(inject('databaseUrl'), { onnotice: () => {}, max: 2 });
});
afterAll(async () => {
  await sql.end();
});

const tables = (Object.values(schema) as unknown[]).filter((v): v is PgTable => is(v, PgTable));
const domainNames = new Set(columnDomains().map((d) => d.name));

/** [table, column, domain] for every schema column typed by a declared domain. */
const domainColumns = tables.flatMap((t) => {
  const config = getTableConfig(t);
  return config.columns
    .filter((c) => domainNames.has(c.getSQLType()))
    .map((c) => [config.name, c.name, c.getSQLType()] as const);
});

describe('column domains', () => {
  it('are in the database as declared: base type, condition and constraint name', async () => {
    const declared = columnDomains();
    expect(declared.length).toBeGreaterThan(50);
    const actual = await sql<{ name: string; base: string; constraint: string; def: string }[]>`
      select t.typname as name, format_type(t.typbasetype, t.typtypmod) as base,
             c.conname as constraint, pg_get_constraintdef(c.oid) as def
      from pg_type t join pg_constraint c on c.contypid = t.oid
      where t.typtype = 'd' and t.typnamespace = 'public'::regnamespace`;
    // PostgreSQL stores a condition in its own normal form: each declared one is compared with
    // what PostgreSQL makes of it in a scratch schema, then thrown away.
    const expected = await sql
      .begin(async (tx) => {
        await tx`create schema domain_probe`;
        for (const d of declared)
          await tx.unsafe(
            `create domain domain_probe.${d.name} as ${d.base} constraint ${d.name}_check check (${d.check})`,
          );
        const rows = await tx<{ name: string; base: string; constraint: string; def: string }[]>`
          select t.typname as name, format_type(t.typbasetype, t.typtypmod) as base,
                 c.conname as constraint, pg_get_constraintdef(c.oid) as def
          from pg_type t join pg_constraint c on c.contypid = t.oid
          where t.typtype = 'd' and t.typnamespace = 'domain_probe'::regnamespace`;
        throw Object.assign(new Error('rollback'), { rows });
      })
      .catch((err: { rows?: unknown }) => {
        if (!err.rows) throw err;
        return err.rows as typeof actual;
      });
    const byName = (rows: typeof actual) => [...rows].sort((a, b) => a.name.localeCompare(b.name));
    expect(byName(actual)).toEqual(byName(expected));
    expect(expected).toHaveLength(declared.length);
  });

  it('type the columns the schema says, and no others', async () => {
    expect(domainColumns.length).toBeGreaterThan(60);
    const rows = await sql<{ table: string; column: string; domain: string }[]>`
      select table_name as table, column_name as column, domain_name as domain
      from information_schema.columns
      where table_schema = 'public' and domain_schema = 'public' and domain_name is not null`;
    const key = (r: readonly [string, string, string]) => r.join('.');
    expect(rows.map((r) => key([r.table, r.column, r.domain])).sort()).toEqual(domainColumns.map(key).sort());
  });

  it('leave no single-column CHECK a domain could carry on the tables that use them', async () => {
    const domainTables = [...new Set(domainColumns.map(([t]) => t))];
    const rows = await sql<{ name: string }[]>`
      select c.conname as name
      from pg_constraint c
      join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
      where c.contype = 'c' and cardinality(c.conkey) = 1
        and c.conrelid::regclass::text = any(${domainTables})
        and format_type(a.atttypid, a.atttypmod) not in ('jsonb', 'character(3)')`;
    expect(rows.map((r) => r.name)).toEqual([]);
  });
});
