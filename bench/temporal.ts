import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { startCluster } from '../tests/chaos/topology';
import { SEARCH_ATTRIBUTE_KEYS } from '../workflows/shared';

/** `--temporal cluster` on a bench's command line: a real Temporal cluster instead of the dev server. */
export function temporalModeFromArgs(argv = process.argv): 'dev' | 'cluster' {
  const i = argv.indexOf('--temporal');
  return i >= 0 && argv[i + 1] === 'cluster' ? 'cluster' : 'dev';
}

/**
 * The benches' Temporal: the dev server from the installed CLI, or (`cluster`) a real Temporal
 * server — frontend, history, matching and worker as separate processes on PostgreSQL — started by
 * `temporal-dev.sh cluster` under `dir`, so ours and the bare baseline share the same cluster.
 */
export async function benchTemporal(
  mode: 'dev' | 'cluster',
  dir: string,
): Promise<{ env: TestWorkflowEnvironment; stop(): Promise<void> }> {
  if (mode === 'cluster') {
    const cluster = await startCluster(dir);
    const env = await TestWorkflowEnvironment.createFromExistingServer({ address: cluster.address });
    return {
      env,
      async stop() {
        try {
          await env.teardown();
        } finally {
          await cluster.stop();
        }
      },
    };
  }
  const temporalBin = execFileSync('bash', [join(import.meta.dirname, '../temporal-dev.sh'), 'path'], {
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
  return { env, stop: () => env.teardown() };
}
