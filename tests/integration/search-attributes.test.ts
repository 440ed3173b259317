import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { msToTs } from '@temporalio/common/lib/time';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkSearchAttributes, registerSearchAttributes } from '../../runtime/search-attributes';
import { SEARCH_ATTRIBUTE_KEYS } from '../../workflows/shared';
import { apiProcess, freePort, type Proc, type ServiceSettings } from '../chaos/topology';
import { testLoginUrl } from '../helpers/db-logins';
import { TEST_ADMIN_TOKEN, TEST_MASTER_KEY } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

// An external Temporal namespace without Switchyard's custom search attributes used to make every
// webhook fail with only "Failed to start Workflow". Now both entry points refuse to start, naming
// the missing attributes and the commands that register them; `npm run migrate`'s registration
// (the same function) fixes the namespace, and then they start. The namespace is a fresh one on
// the suite's dev server, registered without the attributes.

const ROOT = resolve(import.meta.dirname, '../..');
const NAMES = SEARCH_ATTRIBUTE_KEYS.map((k) => k.name);

describe('Temporal namespace without the search attributes', () => {
  let connection: Connection;
  let dir: string;
  const namespace = `sa-missing-${process.pid}-${Date.now().toString(36)}`;
  const procs: Proc[] = [];
  let settings: ServiceSettings;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-sa-'));
    connection = await Connection.connect({ address: inject('temporalAddress') });
    await newNamespace(namespace);
    settings = {
      databaseUrl: testLoginUrl(inject('databaseUrl'), 'api'),
      workerDatabaseUrl: testLoginUrl(inject('databaseUrl'), 'worker'),
      temporalAddress: inject('temporalAddress'),
      taskQueue: `sa-${process.pid}-${Date.now()}`,
      masterKey: TEST_MASTER_KEY,
      adminToken: TEST_ADMIN_TOKEN,
      dir,
      env: { TEMPORAL_NAMESPACE: namespace, SWITCHYARD_DRAIN_S: '0', LOG_LEVEL: 'info' },
    };
  });
  /** Registers a namespace (no custom search attributes) and waits until it can be used. */
  async function newNamespace(name: string) {
    await connection.workflowService.registerNamespace({
      namespace: name,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
    // A new namespace reaches the frontend's namespace cache within a few seconds.
    await waitFor(
      () =>
        connection.operatorService.listSearchAttributes({ namespace: name }).then(
          () => true,
          () => false,
        ),
      { timeoutMs: 30_000, label: `namespace ${name} usable` },
    );
  }

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    await connection?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs an entry point to its exit (bounded: killed by its pid after 60 s). */
  async function runToExit(entry: string, env: Record<string, string>) {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, entry)], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    clearTimeout(timer);
    return { code, output };
  }

  const baseEnv = () => ({
    TEMPORAL_ADDRESS: settings.temporalAddress,
    TEMPORAL_NAMESPACE: namespace,
    TEMPORAL_TASK_QUEUE: settings.taskQueue,
    SWITCHYARD_MASTER_KEY: TEST_MASTER_KEY,
    SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: 'info',
  });

  it('the API and the worker refuse to start, naming the attributes and the command that registers them', async () => {
    expect(await checkSearchAttributes(connection, namespace)).toEqual({
      ok: false,
      missing: NAMES,
      wrongType: [],
    });
    const [api, worker] = await Promise.all([
      runToExit('bin/api.ts', {
        ...baseEnv(),
        DATABASE_URL: settings.databaseUrl,
        PORT: String(await freePort()),
      }),
      runToExit('bin/worker.ts', { ...baseEnv(), DATABASE_URL: settings.workerDatabaseUrl }),
    ]);
    for (const run of [api, worker]) {
      expect(run.code, run.output).toBe(2);
      for (const name of NAMES) expect(run.output).toContain(name);
      expect(run.output).toContain(
        `temporal operator search-attribute create --namespace ${namespace} ${NAMES.map((n) => `--name ${n}`).join(' ')} --type Keyword`,
      );
      expect(run.output).toContain('npm run migrate');
      expect(run.output).not.toContain('Failed to start Workflow');
    }
  }, 120_000);

  it("after migrate's registration the namespace has them, a second run changes nothing, and the API starts", async () => {
    expect(await registerSearchAttributes(connection, namespace)).toEqual({
      outcome: 'registered',
      names: NAMES,
    });
    expect(await checkSearchAttributes(connection, namespace)).toEqual({ ok: true });
    expect(await registerSearchAttributes(connection, namespace)).toEqual({ outcome: 'present' });

    const api = await apiProcess(settings, 1);
    procs.push(api.proc);
    const ready = await fetch(`${api.url}/readyz`);
    expect(ready.status).toBe(200);
    await api.proc.kill('SIGTERM');
    expect(api.proc.child?.exitCode).toBe(0);
  }, 120_000);

  it('an attribute registered with another type is reported, never changed; the missing ones are registered', async () => {
    const other = `${namespace}-typed`;
    await newNamespace(other);
    await connection.operatorService.addSearchAttributes({
      namespace: other,
      searchAttributes: { SwitchyardChannel: encodeSearchAttributeIndexedValueType('TEXT')! },
    });
    await waitFor(async () => (await checkSearchAttributes(connection, other)).ok === false, {
      label: 'the Text attribute listed',
    });

    const result = await registerSearchAttributes(connection, other);
    expect(result.outcome).toBe('refused');
    expect(result.outcome === 'refused' && result.message).toContain(
      'has SwitchyardChannel with another type than Keyword',
    );
    expect(await checkSearchAttributes(connection, other)).toEqual({
      ok: false,
      missing: [],
      wrongType: ['SwitchyardChannel'],
    });
  }, 60_000);
});
