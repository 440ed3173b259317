import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { loadEmbeddedPostgres } from './embedded-root';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
  /** As root, when PostgreSQL runs from a copy its user can reach: that copy's directory. */
  binaries?: string;
}

export interface EmbeddedOptions {
  /** Directory that holds the cluster (created on first start, reused afterwards). */
  dataDir: string;
  port: number;
  database?: string;
  /** Delete the cluster on stop (tests). */
  ephemeral?: boolean;
  onLog?: (line: string) => void;
  /** Extra server settings (`-c name=value`), e.g. diagnostics a benchmark turns on. */
  settings?: Record<string, string>;
}

// The embedded cluster listens on 127.0.0.1 only and uses a fixed local password: it is a
// development default, never a production database (production sets DATABASE_URL).
const USER = 'postgres';
const PASSWORD = 'switchyard-local';

/**
 * Starts (initialising on first use) an embedded PostgreSQL under dataDir. As root, postgres
 * runs as the `postgres` OS user, so dataDir's parent must be reachable by it (else one line says
 * why and what to do; see embedded-root.ts); unreachable binaries are run from a reachable copy.
 */
export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const dir = resolve(opts.dataDir);
  await mkdir(join(dir, '..'), { recursive: true });
  await chmod(join(dir, '..'), 0o755).catch(() => undefined);
  const { EmbeddedPostgres, binaries } = await loadEmbeddedPostgres(dir);
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    persistent: !opts.ephemeral,
    createPostgresUser: true,
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      ...Object.entries(opts.settings ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    ],
    onLog: opts.onLog ?? (() => undefined),
    onError: (e: unknown) => opts.onLog?.(String(e)),
  });
  const initialised = existsSync(join(dir, 'PG_VERSION'));
  if (!initialised) await pg.initialise();
  await pg.start().catch(async (err: unknown) => {
    const pid = await readFile(join(dir, 'postmaster.pid'), 'utf8').catch(() => '');
    throw new Error(
      `embedded PostgreSQL did not start on port ${opts.port}${pid ? ' (another instance may be running on this data dir)' : ''}: ${String(err ?? 'exited')}`,
    );
  });
  const database = opts.database ?? 'switchyard';
  if (!initialised) await pg.createDatabase(database);
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/${database}`,
    stop: () => pg.stop(),
    ...(binaries ? { binaries } : {}),
  };
}
