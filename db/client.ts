import postgres, { type Sql } from 'postgres';

export type { Sql };

export interface SqlOptions {
  max?: number;
  /**
   * The audit chain key (lib/audit-key.ts), sent as the connection parameter `app.audit_key`:
   * audit_append and audit_digest refuse to work without it. Required for every connection the
   * application writes or verifies audit entries through.
   */
  auditKey?: string;
}

/**
 * A second pool on the same login and parameters as `from`, whose statements give up waiting for a
 * row lock after `lockTimeoutMs` (PostgreSQL's lock_timeout, SQLSTATE 55P03) instead of waiting as
 * long as the holder takes. Ingress records on one (api/ingress/record-batcher.ts): a webhook must
 * be answered while the provider still waits (WeCom gives a callback 5 s), and a record stuck
 * behind a lock would hold every webhook queued behind its statement.
 */
export function createBoundedWaitSql(
  from: Sql,
  opts: { max: number; lockTimeoutMs: number; applicationName: string },
): Sql {
  const { connection } = from.options as unknown as { connection?: Record<string, string> };
  return siblingSql(from, {
    max: opts.max,
    connection: {
      ...connection,
      lock_timeout: String(opts.lockTimeoutMs),
      // Told apart from the main pool in pg_stat_activity.
      application_name: opts.applicationName,
    },
  });
}

/**
 * Another pool made from `from`'s parsed options (they carry `shared`, so postgres.js takes them
 * as they are, as its own `sql.listen` does): same login, parameters and types, with `overrides`.
 */
function siblingSql(from: Sql, overrides: Record<string, unknown>): Sql {
  return postgres({ ...from.options, ...overrides } as unknown as postgres.Options<
    Record<string, never>
  >) as unknown as Sql;
}

/**
 * The one place that creates the PostgreSQL client. The API and the worker log in as their own
 * roles (switchyard_api / switchyard_worker, migration 0021), which own nothing, and every unit of
 * work drops to a runtime role per transaction (db/tx.ts), so the seeds' grants and row-level
 * security apply to every application statement.
 */
export function createSql(databaseUrl: string, opts: SqlOptions = {}): Sql {
  return postgres(databaseUrl, {
    max: opts.max ?? 10,
    idle_timeout: 30,
    connect_timeout: 10,
    // Reconnect attempts at most ~1 s apart. postgres.js's default backoff grows with the failed
    // attempts of the whole pool (3^n / 100 s, up to 20 s), so a PostgreSQL restart of a few seconds
    // left connections asleep for 10–20 s after it was back, and webhooks timed out long after the
    // outage (release gate, 2026-12-07). While it is down, a pool of 10 then tries about 10
    // connections a second, each refused at once.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1) * (0.5 + Math.random() / 2),
    onnotice: () => undefined,
    // bigint columns (versions, counters) come back as JS numbers; they stay far below 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
    transform: { undefined: null },
    ...(opts.auditKey ? { connection: { 'app.audit_key': opts.auditKey } as Record<string, string> } : {}),
  });
}

/**
 * A dedicated one-connection client for LISTEN (registry/listener.ts), made from an existing
 * client's parsed options as postgres.js itself does for `sql.listen`: same login, same
 * parameters. It never idles out or recycles (the LISTEN lives on that one session), and the
 * caller sees notifications and the session ending, so it can re-listen and flush its cache.
 */
export function createListenSql(
  from: Sql,
  handlers: { onnotify: (channel: string, payload: string) => void; onclose: () => void },
): Sql {
  // What postgres.js's own listen sets; `onnotify` is an option its types do not declare.
  return siblingSql(from, {
    max: 1,
    idle_timeout: null,
    max_lifetime: null,
    fetch_types: false,
    debug: false,
    onnotify: handlers.onnotify,
    onclose: handlers.onclose,
  });
}
