import { execFileSync } from 'node:child_process';
import { readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The global setup (vitest calls `setup`) of the process projects: the tests that run the built CLI (real sockets,
 * several processes, crashes, draining) need dist/, so it is built here, once a run, and only
 * when a source changed since the last build; the fast projects run on the sources and need none.
 * Both process projects call it, one after the other (vitest sets projects up in turn): the
 * second finds the build current.
 */
const ROOT = join(import.meta.dirname, '../..');
const STAMP = join(ROOT, 'dist', '.built');
const INPUTS = ['src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];

export function setup(): void {
  if (newestInput() < stampTime()) return;
  const started = Date.now();
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')],
    { cwd: ROOT, stdio: 'inherit' },
  );
  writeFileSync(STAMP, '');
  // The stamp is as new as the moment the build began: a source saved during the build is newer.
  utimesSync(STAMP, started / 1000, started / 1000);
}

function stampTime(): number {
  try {
    return statSync(STAMP).mtimeMs;
  } catch {
    return -1;
  }
}

function newestInput(): number {
  return Math.max(...INPUTS.map((input) => newest(join(ROOT, input))));
}

function newest(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((entry) => newest(join(path, entry))));
}
