import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // Infra synth and the engines (dynalite, s3rver) are CPU-heavy: two workers match the 2-core machines.
    pool: 'forks',
    maxWorkers: 2,
    // Generous, because these are limits for a stuck test, not speed goals (those are `npm run bench`): end-to-end
    // jobs run real processes, and a loaded CI host (CPU steal) can make a 30 s job take two minutes.
    testTimeout: 180_000,
    hookTimeout: 120_000,
    setupFiles: ['test/setup.ts'],
  },
});
