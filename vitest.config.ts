import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // Infra synth and the engines (dynalite, s3rver) are CPU-heavy: two workers match the 2-core machines.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    setupFiles: ['test/setup.ts'],
  },
});
