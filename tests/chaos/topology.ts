import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { type EmbeddedDatabase, startEmbeddedPostgres } from '../../db/embedded';

// The release gate's topology, every part a real process on 127.0.0.1 that the harness started and
// can kill by its own id: one PostgreSQL (embedded, restartable on its data dir), one Temporal (the
// dev server on a SQLite file, so a restart keeps its state — or an external cluster), and N API
// and N worker processes running the product's own entry points (`bin/api.ts`, `bin/worker.sh`).

const ROOT = resolve(import.meta.dirname, '../..');

export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? ok(addr.port) : fail(new Error('no port'))));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A child process the harness owns: started, killed by signal, started again with the same settings. */
export class Proc {
  child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  restarts = 0;
  /**
   * Exits the harness did not ask for (a crash), and SIGTERM stops that did not end cleanly: each
   * fails the release gate, with the last lines of the process's log (the cause travels with it).
   */
  private readonly crashes: string[] = [];
  private reported: Promise<void> = Promise.resolve();
  /** the signal the harness stopped the process with (null: not asked), and whether it had to SIGKILL it after */
  private stopSignal: NodeJS.Signals | null = null;
  private forced = false;
  constructor(
    readonly name: string,
    private readonly command: string,
    private readonly args: string[],
    private readonly env: Record<string, string>,
    private readonly logFile: string,
    /** resolves once the process is ready (a log line, a health check) */
    private readonly ready: (p: Proc) => Promise<void>,
  ) {}

  async start(): Promise<void> {
    const log = createWriteStream(this.logFile, { flags: 'a' });
    const child = spawn(this.command, this.args, {
      cwd: ROOT,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    // Both pipes write to one file: neither may end it; the child's 'close' (all output read) does.
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    const drained = new Promise<void>((r) => child.once('close', () => log.end(r)));
    this.stopSignal = null;
    this.forced = false;
    this.exited = new Promise((r) =>
      child.once('exit', (code, signal) => {
        // A crash, or a stop asked with SIGTERM that did not end in a clean exit (an error, or the
        // SIGKILL after 30 s): the process's drain did not do its job.
        const how = signal ?? `code ${code}`;
        const problem = !this.stopSignal
          ? `exited by itself (${how})`
          : this.stopSignal === 'SIGTERM' && (this.forced || code !== 0)
            ? `did not stop cleanly on SIGTERM (${this.forced ? 'killed after 30 s' : how})`
            : null;
        if (problem) {
          // Its log's end is read once the output has drained (a grandchild holding the pipes
          // open must not hold the report: 2 s at most).
          this.reported = Promise.race([drained, new Promise((t) => setTimeout(t, 2000).unref())]).then(
            () => {
              this.crashes.push(
                `${this.name} (pid ${child.pid}) ${problem}; its log ends:\n${logTail(this.logFile)}`,
              );
            },
          );
        }
        r();
      }),
    );
    await this.ready(this);
  }

  /** The crashes so far, each once its log's end could be read. */
  async crashReports(): Promise<string[]> {
    await this.reported;
    return [...this.crashes];
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.running) this.child!.kill(sig);
  }

  async kill(sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.running) return;
    this.stopSignal = sig;
    this.child!.kill(sig);
    const timer = setTimeout(() => {
      this.forced = true;
      this.child?.kill('SIGKILL');
    }, 30_000);
    await this.exited;
    clearTimeout(timer);
  }

  async restart(sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.kill(sig);
    this.restarts++;
    await this.start();
  }

  /** Waits for the first line of output containing `text` (from now on). */
  waitForOutput(text: string, timeoutMs = 120_000): Promise<void> {
    const child = this.child!;
    return new Promise((ok, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`${this.name}: no "${text}" in ${timeoutMs} ms`)),
        timeoutMs,
      );
      const onData = (chunk: Buffer) => {
        if (chunk.toString().includes(text)) {
          clearTimeout(timer);
          child.stdout?.off('data', onData);
          ok();
        }
      };
      child.stdout?.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        fail(new Error(`${this.name} exited (${code}) before "${text}"; see ${this.logFile}`));
      });
    });
  }
}

/** The last lines of a log file (for a failure message), or why it could not be read. */
function logTail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (err) {
    return `(log ${file} unreadable: ${String(err)})`;
  }
}

export interface TemporalService {
  address: string;
  /** the dev server process, or null for a cluster */
  proc: Proc | null;
  /** a cluster's service processes can be killed one by one (history, matching) */
  killService?(service: 'history' | 'matching'): Promise<void>;
  restart(): Promise<void>;
  /** Temporal stops answering (SIGSTOP) for `ms`, then resumes. */
  freeze(ms: number): Promise<void>;
  stop(): Promise<void>;
}

/** Temporal's frontend answers (a health check within the deadline). */
async function temporalHealthy(address: string): Promise<boolean> {
  try {
    const conn = await Connection.connect({ address, connectTimeout: 1000 });
    try {
      await conn.withDeadline(Date.now() + 2000, () => conn.healthService.check({}));
      return true;
    } finally {
      await conn.close();
    }
  } catch {
    return false;
  }
}

export async function waitTemporal(address: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await temporalHealthy(address)) return;
    await sleep(500);
  }
  throw new Error(`Temporal at ${address} did not answer within ${timeoutMs} ms`);
}

/** The dev server on a SQLite file under `dir`, with the product's custom search attributes. */
export async function startDevServer(dir: string): Promise<TemporalService> {
  const cli = execFileSync('bash', [join(ROOT, 'temporal-dev.sh'), 'path'], { encoding: 'utf8' }).trim();
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--ui-port',
    String(await freePort()),
    '--db-filename',
    join(dir, 'temporal.sqlite'),
    '--log-level',
    'error',
    '--headless',
  ];
  for (const sa of ['SwitchyardTenantId', 'SwitchyardChannel', 'SwitchyardMessageStatus'])
    args.push('--search-attribute', `${sa}=Keyword`);
  const proc = new Proc('temporal', cli, args, {}, join(dir, 'temporal.log'), () => waitTemporal(address));
  await proc.start();
  return {
    address,
    proc,
    async restart() {
      await proc.restart('SIGTERM');
    },
    async freeze(ms) {
      proc.signal('SIGSTOP');
      await sleep(ms);
      proc.signal('SIGCONT');
    },
    stop: () => proc.kill('SIGTERM'),
  };
}

/**
 * A real Temporal cluster (`./temporal-dev.sh cluster start`: frontend, history, matching and
 * worker as separate processes on PostgreSQL) under `dir`, on its own ports; its processes are the
 * script's, signalled by their pid files.
 */
export async function startCluster(dir: string): Promise<TemporalService> {
  const script = join(ROOT, 'temporal-dev.sh');
  const env = {
    ...process.env,
    SWITCHYARD_DATA_DIR: dir,
    SWITCHYARD_CLUSTER_PORT: '17333',
    SWITCHYARD_CLUSTER_PG_PORT: String(await freePort()),
  };
  const run = (...args: string[]) =>
    execFileSync('bash', [script, 'cluster', ...args], { env, stdio: 'pipe' });
  let address: string;
  try {
    run('start');
    address = run('address').toString().trim();
    await waitTemporal(address);
  } catch (err) {
    // Whatever part did start (PostgreSQL, some services) is ended again.
    run('stop');
    throw err;
  }
  const pidOf = (service: string) =>
    Number(readFileSync(join(dir, 'cluster', 'run', `${service}.pid`), 'utf8').split('\n')[0]);
  return {
    address,
    proc: null,
    async killService(service) {
      process.kill(pidOf(service), 'SIGKILL');
      await sleep(3000);
      run('restart-service', service);
      await waitTemporal(address);
    },
    async restart() {
      run('restart-service', 'frontend');
      await waitTemporal(address);
    },
    async freeze(ms) {
      const pid = pidOf('frontend');
      process.kill(pid, 'SIGSTOP');
      await sleep(ms);
      process.kill(pid, 'SIGCONT');
    },
    async stop() {
      run('stop');
    },
  };
}

export interface Database {
  url: string;
  restart(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** An embedded PostgreSQL under `dir`, restartable on the same data directory and port. */
export async function startDatabase(dir: string): Promise<Database> {
  const port = await freePort();
  mkdirSync(dir, { recursive: true });
  const opts = { dataDir: join(dir, 'pg'), port, settings: { max_connections: '300' } };
  let db: EmbeddedDatabase = await startEmbeddedPostgres(opts);
  return {
    url: db.url,
    async restart(downMs) {
      await db.stop();
      await sleep(downMs);
      db = await startEmbeddedPostgres(opts);
    },
    stop: () => db.stop(),
  };
}

export interface ServiceSettings {
  /** the API's login (switchyard_api) */
  databaseUrl: string;
  /** the worker's login (switchyard_worker) */
  workerDatabaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  masterKey: string;
  adminToken: string;
  dir: string;
  /** extra environment for every API and worker process */
  env?: Record<string, string>;
}

const tsx = (entry: string) => [process.execPath, ['--import', 'tsx', join(ROOT, entry)]] as const;

/** One `npm run api` process on a free port; ready when /healthz answers. */
export async function apiProcess(s: ServiceSettings, n: number): Promise<{ proc: Proc; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const [cmd, args] = tsx('bin/api.ts');
  const proc = new Proc(
    `api-${n}`,
    cmd,
    [...args],
    { ...baseEnv(s), PORT: String(port) },
    join(s.dir, `api-${n}.log`),
    async () => {
      const deadline = Date.now() + 90_000;
      while (Date.now() < deadline) {
        const ok = await fetch(`${url}/healthz`)
          .then((r) => r.ok)
          .catch(() => false);
        if (ok) return;
        await sleep(250);
      }
      throw new Error(`api-${n} did not answer /healthz; see its log`);
    },
  );
  await proc.start();
  return { proc, url };
}

/** One `npm run worker` process; ready once it logs that it polls. */
export async function workerProcess(s: ServiceSettings, n: number): Promise<Proc> {
  // Through the launcher, as npm run worker (it applies SWITCHYARD_WORKER_HEAP_MB and execs node).
  const [cmd, args] = ['sh', [join(ROOT, 'bin/worker.sh')]] as const;
  const env = {
    ...baseEnv(s),
    DATABASE_URL: s.workerDatabaseUrl,
    // Several workers on one host: each its own metrics ports (kept across its restarts).
    SWITCHYARD_WORKER_PORT: String(await freePort()),
    SWITCHYARD_TEMPORAL_METRICS_PORT: String(await freePort()),
  };
  const proc = new Proc(`worker-${n}`, cmd, [...args], env, join(s.dir, `worker-${n}.log`), (p) =>
    p.waitForOutput('worker running'),
  );
  await proc.start();
  return proc;
}

function baseEnv(s: ServiceSettings): Record<string, string> {
  return {
    DATABASE_URL: s.databaseUrl,
    TEMPORAL_ADDRESS: s.temporalAddress,
    TEMPORAL_TASK_QUEUE: s.taskQueue,
    SWITCHYARD_MASTER_KEY: s.masterKey,
    SWITCHYARD_ADMIN_TOKEN: s.adminToken,
    // The fakes of Telegram, WeCom, the model and the tools listen on 127.0.0.1.
    SWITCHYARD_EGRESS: 'allow_private',
    LOG_LEVEL: 'info',
    ...s.env,
  };
}
