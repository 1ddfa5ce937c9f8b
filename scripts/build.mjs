// Builds the program rowi runs, dist/rowi/, from src/ when a source changed since the last build,
// and does nothing otherwise: `npm start` runs it before every start, so a checkout whose build is
// current starts at once, and a fresh clone's first start waits about two seconds, not a compile.
// The process tests' global setup runs it too (test/helpers/build-once.ts). `--force` builds anyway.
//
// dist/rowi/ is the server bundled by esbuild: a handful of files instead of some 900 modules
// (rowi's own and its dependencies'), which starts in about half the time and holds about 35 MB
// less in every process (docs/performance.md, "Memory"). Every entry point sits in that one folder,
// so a module that starts a thread or a child by its file name next to itself (the import and
// webhook threads, the checkpoint thread, a backup's copy, the SQLite check) finds it there as in
// src/. Types are not checked here: `npm run typecheck` does that (and CI runs it). `npm run build`
// also compiles each module to dist/src/ with tsc, for the benchmarks that import modules.
// The console's files (console/, served at /console) are built with it, into dist/console/.
import { build } from 'esbuild';
import { mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildConsole } from './build-console.mjs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'dist', 'rowi');
const STAMP = join(OUT, '.built');
const INPUTS = ['src', 'console', 'package.json', 'package-lock.json', 'tsconfig.json', 'scripts'];

/** The programs: the CLI, and each file a thread or a child process is started from. */
const ENTRIES = {
  cli: 'src/process/cli.ts',
  'import-thread-entry': 'src/process/import-thread-entry.ts',
  'webhook-thread-entry': 'src/process/webhook-thread-entry.ts',
  'checkpoint-worker': 'src/db/checkpoint-worker.js',
  'backup-child': 'src/db/backup-child.js',
  'sqlite-check-child': 'src/db/sqlite-check-child.js',
};

/**
 * Left to Node.js to load from node_modules: the native SQLite driver, and the CommonJS packages
 * rowi imports on first use (`await import(…)`), whose named exports only Node's own loader finds.
 */
const EXTERNAL = ['better-sqlite3', 'pg-native', 'prom-client', 'undici'];

const mtime = (path) => {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return -1;
  }
};
/** The newest change under a path: a file's, or a folder's (a file added, renamed or removed). */
const newest = (path) => {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((entry) => newest(join(path, entry))));
};

/**
 * One build at a time in a checkout: two at once (two test runs, a test run beside `npm start`)
 * would remove each other's files. The second waits for the first, then finds the build current.
 * A lock older than five minutes was left by a build that was killed.
 */
const LOCK = join(ROOT, 'dist', '.build-lock');
async function lock() {
  mkdirSync(join(ROOT, 'dist'), { recursive: true });
  for (let waited = 0; ; waited += 100) {
    try {
      mkdirSync(LOCK);
      return;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      if (Date.now() - mtime(LOCK) > 5 * 60_000) rmSync(LOCK, { recursive: true, force: true });
      else if (waited > 10 * 60_000) throw new Error(`another build has held ${LOCK} for ten minutes`);
      else await sleep(100);
    }
  }
}

const force = process.argv.includes('--force');
const stale = () => Math.max(...INPUTS.map((input) => newest(join(ROOT, input)))) >= mtime(STAMP);
if (force || stale()) {
  await lock();
  try {
    if (force || stale()) await rebuild();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

async function rebuild() {
  const started = Date.now();
  rmSync(OUT, { recursive: true, force: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: ENTRIES,
    outdir: OUT,
    chunkNames: '[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    // Whitespace and syntax only: names stay as written, so stack traces in the log still say which
    // function; the source map beside each file gives their lines (node --enable-source-maps).
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: 'linked',
    logLevel: 'warning',
    // The CommonJS packages bundled call require() for Node's own modules.
    banner: {
      js: "import { createRequire as __rowiCreateRequire } from 'node:module'; const require = __rowiCreateRequire(import.meta.url);",
    },
  });
  await buildConsole(ROOT);
  writeFileSync(STAMP, '');
  // The stamp is as new as the moment the build began: a source saved during the build is newer.
  utimesSync(STAMP, started / 1000, started / 1000);
}
