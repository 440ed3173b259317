import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_WORKER_HEAP_MB, loadEnv } from '../../config/env';

const LAUNCHER = join(import.meta.dirname, '../../bin/worker.sh');

describe('settings renamed since they were first read', () => {
  it('the former name counts when the new one is unset, never over it', () => {
    expect(loadEnv({ SWITCHYARD_WORKER_METRICS_PORT: '9500' }).SWITCHYARD_WORKER_PORT).toBe(9500);
    expect(
      loadEnv({ SWITCHYARD_WORKER_METRICS_PORT: '9500', SWITCHYARD_WORKER_PORT: '9600' })
        .SWITCHYARD_WORKER_PORT,
    ).toBe(9600);
    expect(loadEnv({ TEMPORAL_UI_URL: 'http://ui.example:8080' }).SWITCHYARD_TEMPORAL_UI_URL).toBe(
      'http://ui.example:8080',
    );
    expect(loadEnv({}).SWITCHYARD_TEMPORAL_UI_URL).toBeUndefined();
  });
});

describe('ingress group commit setting', () => {
  it('defaults to 2 statements at once and refuses 0 or a non-number with the setting named', () => {
    expect(loadEnv({}).SWITCHYARD_INGRESS_RECORD_CONCURRENCY).toBe(2);
    expect(
      loadEnv({ SWITCHYARD_INGRESS_RECORD_CONCURRENCY: '8' }).SWITCHYARD_INGRESS_RECORD_CONCURRENCY,
    ).toBe(8);
    expect(() => loadEnv({ SWITCHYARD_INGRESS_RECORD_CONCURRENCY: '0' })).toThrow(
      /SWITCHYARD_INGRESS_RECORD_CONCURRENCY/,
    );
    expect(() => loadEnv({ SWITCHYARD_INGRESS_RECORD_CONCURRENCY: 'many' })).toThrow(
      /SWITCHYARD_INGRESS_RECORD_CONCURRENCY/,
    );
  });
});

describe('worker heap bound (SWITCHYARD_WORKER_HEAP_MB, applied by bin/worker.sh)', () => {
  it('defaults to what the launcher applies; 0 means V8 decides; a bound too small to hold the cache is refused', () => {
    expect(loadEnv({}).SWITCHYARD_WORKER_HEAP_MB).toBe(DEFAULT_WORKER_HEAP_MB);
    expect(readFileSync(LAUNCHER, 'utf8')).toContain(`SWITCHYARD_WORKER_HEAP_MB:-${DEFAULT_WORKER_HEAP_MB}}`);
    expect(loadEnv({ SWITCHYARD_WORKER_HEAP_MB: '' }).SWITCHYARD_WORKER_HEAP_MB).toBe(DEFAULT_WORKER_HEAP_MB);
    expect(loadEnv({ SWITCHYARD_WORKER_HEAP_MB: '0' }).SWITCHYARD_WORKER_HEAP_MB).toBe(0);
    expect(loadEnv({ SWITCHYARD_WORKER_HEAP_MB: '1024' }).SWITCHYARD_WORKER_HEAP_MB).toBe(1024);
    expect(loadEnv({ SWITCHYARD_WORKER_HEAP_MB: '0384' }).SWITCHYARD_WORKER_HEAP_MB).toBe(384);
    for (const bad of ['64', '007', '1.5', 'lots', '-1', ' 384', '+384', '1e3', '0x180', '2000000', ' '])
      expect(() => loadEnv({ SWITCHYARD_WORKER_HEAP_MB: bad })).toThrow(/SWITCHYARD_WORKER_HEAP_MB/);
  });

  it('the launcher refuses what the settings refuse, before starting anything', () => {
    for (const bad of ['lots', '1.5', '-1', '64', '007', '2000000', '123456789012345678901234']) {
      const run = spawnSync('sh', [LAUNCHER], {
        env: { PATH: process.env.PATH, SWITCHYARD_WORKER_HEAP_MB: bad },
        encoding: 'utf8',
        timeout: 10_000,
      });
      expect(run.status, bad).toBe(2);
      expect(run.stderr).toMatch(/SWITCHYARD_WORKER_HEAP_MB must be a whole number of MB, 0/);
    }
  });
});
