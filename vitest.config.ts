import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Seven projects, by what a test needs:
 * - "fast": every test that runs in this process on the sources (unit tests of pure code, and
 *   the app in-process on a fresh SQLite file per test app), but the exhaustive ones. No build.
 * - "exhaustive": the in-process files that sweep everything (EXHAUSTIVE below), on SQLite.
 * - "process": the tests that run the built CLI (`*.process.test.ts`: real sockets, several
 *   processes, workers, crashes, draining, TLS, the README's curl examples). Their global setup
 *   builds dist/ once a run, when a source changed (test/helpers/build-once.ts).
 * - "fast-postgres" and "process-postgres": the files about storage, again on PostgreSQL
 *   (test/helpers/database.ts), plus those only PostgreSQL has. Without ROWI_TEST_PG_URL they are
 *   left out, and global-setup.ts says so.
 * - "alone": the backups (ALONE below), one file at a time, last.
 * - "console": the console (console/) in headless Chromium against the app in-process; its global
 *   setup builds dist/ as the process projects' does, since the app serves the built console.
 * `npm test` runs them all; `npm run test:fast` (the fast project) is the quick loop while writing code.
 * ROWI_TEST_STORAGE_ONLY=1 narrows fast and process to the storage files (alone holds only such): .ci/run's pass on
 * the other SQLite driver (better-sqlite3 under Node 20), the one thing that differs there.
 */
const PROCESS_FILES = 'test/**/*.process.test.ts';
/** The console in headless Chromium, against the app in this process, serving the built console. */
const CONSOLE_FILES = 'test/console/**/*.test.ts';
/**
 * In-process files that sweep everything and take the longest: the fuzzing, every schema compiled,
 * every route × credential, the docs page in a browser, the generated client, the compatibility
 * checker. `npm test` runs them (the "exhaustive" project); the quick loop leaves them out.
 */
const EXHAUSTIVE = [
  'test/fuzz/**/*.test.ts',
  'test/http/{openapi,docs-page,compatibility}.test.ts',
  'test/auth/permission-matrix.test.ts',
  'test/clients/typescript-client.test.ts',
];
/**
 * The files about storage, run again on PostgreSQL, and those only PostgreSQL has. Every app in a
 * test stores through the database, but a file is here only when what it asserts could differ with
 * it: what is stored and read back, values a database refuses (NUL, lone surrogates, huge numbers),
 * locking, signals. Those checking the OpenAPI document, media types, read-only fields, query
 * parameters and which route needs which permission (all decided before a query runs) run once.
 */
const POSTGRES_FAST = [
  'test/resources/**/*.test.ts',
  'test/http/{conventions,idempotency,health,timestamps,bodies,documented-refusals,stored-answers,fields-document}.test.ts',
  'test/auth/{api-keys,bearer-tokens,credential-changes,declared-resources,idempotency-scope}.test.ts',
  'test/audit-trail/**/*.test.ts',
  'test/postgres/**/*.test.ts',
  'test/fuzz/**/*.test.ts',
  'test/outbox/**/*.test.ts',
  'test/db/{webhook-owners,owners}-migration.test.ts',
  'test/docs/events-snippets.test.ts',
  'test/db/retention.test.ts',
  'test/db/array-rows.test.ts',
  'test/db/compiled-rows.test.ts',
  'test/db/storable-text.test.ts',
];
/**
 * In test/resources/ but not about storage: sums done before anything is stored, and an import's
 * pace under the caller's rate budget (kept in memory or Redis, whatever the database).
 */
const NOT_STORAGE = ['test/resources/{money,order-lines,orders.import-budget}.test.ts'];
const POSTGRES_PROCESS = [
  'test/auth/{oauth,credential-changes}.process.test.ts',
  'test/resources/orders.process.test.ts',
  'test/resources/imports.process.test.ts',
  'test/resources/imports-concurrency.process.test.ts',
  'test/resources/imports-thread.process.test.ts',
  'test/resources/imports-access.process.test.ts',
  'test/process/workers.process.test.ts',
  'test/postgres/**/*.process.test.ts',
  'test/outbox/**/*.process.test.ts',
  'test/resources/events.stream-slow-readers.process.test.ts',
];
/** SQLite's own: its driver, locks, checkpoints, backups and damage (no PostgreSQL run: test/postgres/ has theirs). */
const SQLITE_FAST = ['test/db/**/*.test.ts'];
const SQLITE_PROCESS = ['test/db/**/*.process.test.ts'];
/**
 * Backups, which copy in a child process at the lowest CPU priority (nice 19): beside another test
 * file keeping both cores busy, such a copy was starved past the test's patience. They run alone.
 */
const ALONE = [
  'test/resources/backups.test.ts',
  'test/db/{backup,backup-schedule}.test.ts',
  'test/process/backup.process.test.ts',
  'test/console/backups.test.ts',
];
const STORAGE_ONLY = process.env.ROWI_TEST_STORAGE_ONLY === '1';
const SETUP = 'test/helpers/global-setup.ts';
const BUILD = 'test/helpers/build-once.ts';
const POSTGRES = { ROWI_TEST_BACKEND: 'postgres' };
/**
 * The in-process files run two at once (one a core, at least two, at most four), then those
 * running the built CLI one more at once (they mostly wait for a timer, a child process or a
 * socket, so they overlap well; in-process files three at once on 2 cores made timing tests fail
 * and the run no shorter), then the backups, alone. Each file uses its own database (file or
 * schema) and port 0; vitest wants one maxWorkers a group.
 */
const AT_ONCE = Math.min(4, Math.max(2, availableParallelism()));
const IN_PROCESS = { sequence: { groupOrder: 0 }, maxWorkers: AT_ONCE };
const PROCESSES = { sequence: { groupOrder: 1 }, maxWorkers: AT_ONCE + 1 };
const ONE_AT_A_TIME = { sequence: { groupOrder: 2 }, maxWorkers: 1 };

export default defineConfig({
  resolve: {
    // The bench's modules import rowi's compiled modules (../dist/src/…); under test they load the
    // sources instead, so the test of the bench's baseline server needs no build and cannot pass
    // on a stale one.
    alias: [{ find: /^\.\.\/dist\/src\/(.*)\.js$/, replacement: `${import.meta.dirname}/src/$1.ts` }],
  },
  test: {
    globalSetup: [SETUP],
    pool: 'forks',
    // Test files share their worker's module cache instead of importing the app afresh each
    // (a third of a second per file, half a minute a run). They can: every file starts its own
    // app on its own database, and none mocks a module or leaves a global changed.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          ...IN_PROCESS,
          include: STORAGE_ONLY ? [...POSTGRES_FAST, ...SQLITE_FAST] : ['test/**/*.test.ts'],
          exclude: [
            PROCESS_FILES,
            CONSOLE_FILES,
            'test/postgres/**',
            ...ALONE,
            ...(STORAGE_ONLY ? NOT_STORAGE : EXHAUSTIVE),
          ],
        },
      },
      ...(STORAGE_ONLY
        ? []
        : [
            {
              extends: true as const,
              test: {
                name: 'console',
                ...IN_PROCESS,
                include: [CONSOLE_FILES],
                exclude: ALONE,
                globalSetup: [SETUP, BUILD],
              },
            },
          ]),
      {
        extends: true,
        test: { name: 'exhaustive', ...IN_PROCESS, include: EXHAUSTIVE },
      },
      {
        extends: true,
        test: {
          name: 'process',
          ...PROCESSES,
          include: STORAGE_ONLY ? [...POSTGRES_PROCESS, ...SQLITE_PROCESS] : [PROCESS_FILES],
          exclude: ['test/postgres/**', ...ALONE],
          globalSetup: [SETUP, BUILD],
        },
      },
      {
        extends: true,
        test: {
          name: 'alone',
          ...ONE_AT_A_TIME,
          include: ALONE,
          // The Node 20 pass runs the storage files; the console's backup test is the browser's.
          exclude: STORAGE_ONLY ? [CONSOLE_FILES] : [],
          globalSetup: [SETUP, BUILD],
        },
      },
      ...(process.env.ROWI_TEST_PG_URL
        ? [
            {
              extends: true as const,
              test: {
                name: 'fast-postgres',
                ...IN_PROCESS,
                include: POSTGRES_FAST,
                exclude: [PROCESS_FILES, ...NOT_STORAGE],
                env: POSTGRES,
              },
            },
            {
              extends: true as const,
              test: {
                name: 'process-postgres',
                ...PROCESSES,
                include: POSTGRES_PROCESS,
                globalSetup: [SETUP, BUILD],
                env: POSTGRES,
              },
            },
          ]
        : []),
    ],
  },
});
