import { defineConfig } from 'vitest/config';

/**
 * Two projects: "sqlite" runs every test file on the embedded default; "postgres" runs the files
 * that touch storage again on PostgreSQL (test/helpers/database.ts), plus those only PostgreSQL
 * has. Without ROWI_TEST_PG_URL the second project is left out, and global-setup.ts says so.
 */
const POSTGRES_FILES = [
  'test/resources/**/*.test.ts',
  'test/http/{conventions,idempotency,health,openapi,timestamps,read-only-fields,media-types,bodies,documented-refusals}.test.ts',
  'test/auth/{api-keys,audit,bearer-tokens,enforcement,idempotency-scope,oauth,permission-matrix}.test.ts',
  'test/{orders,workers}.process.test.ts',
  'test/postgres/**/*.test.ts',
  'test/fuzz/**/*.test.ts',
];

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    // Test files share their worker's module cache instead of importing the app afresh each
    // (a third of a second per file, half a minute a run). They can: every file starts its own
    // app on its own database, and none mocks a module or leaves a global changed.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites that spawn servers or hammer sockets stay correct in parallel; each uses its own
    // database (file or schema) and port 0.
    fileParallelism: true,
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: ['test/postgres/**'] } },
      ...(process.env.ROWI_TEST_PG_URL
        ? [{ extends: true as const, test: { name: 'postgres', include: POSTGRES_FILES, env: { ROWI_TEST_BACKEND: 'postgres' } } }]
        : []),
    ],
  },
});
