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
