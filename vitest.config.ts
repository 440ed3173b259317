import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    globalSetup: ['tests/setup/global.ts'],
    reporters: ['default', './tests/setup/summary-reporter.ts'],
    // Real PostgreSQL and a real Temporal dev server are shared by all files; tests isolate by
    // unique tenants and task queues. Two cores: keep parallelism modest.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
