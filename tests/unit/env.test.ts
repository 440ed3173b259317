import { describe, expect, it } from 'vitest';
import { loadEnv } from '../../config/env';

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
