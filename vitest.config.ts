import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites that spawn servers or hammer sockets stay correct in parallel; each uses its own
    // database file and port 0.
    fileParallelism: true,
  },
});
