import postgres, { type Sql } from 'postgres';

export type { Sql };

/**
 * The one place that creates the PostgreSQL client. The process connects as the schema owner
 * and every unit of work drops to a runtime role per transaction (db/tx.ts), so the seeds'
 * grants and row-level security apply to application statements.
 */
export function createSql(databaseUrl: string, opts: { max?: number } = {}): Sql {
  return postgres(databaseUrl, {
    max: opts.max ?? 10,
    idle_timeout: 30,
    connect_timeout: 10,
    onnotice: () => undefined,
    // bigint columns (versions, counters) come back as JS numbers; they stay far below 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
    transform: { undefined: null },
  });
}
