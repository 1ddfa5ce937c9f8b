import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The global setup (vitest calls `setup`) of the process projects: the tests that run the built CLI (real sockets,
 * several processes, crashes, draining) need dist/, so it is built here, once a run, and only
 * when a source changed since the last build (scripts/build.mjs, as `npm start` builds); the fast
 * projects run on the sources and need none. Both process projects call it, one after the other
 * (vitest sets projects up in turn): the second finds the build current.
 */
export function setup(): void {
  execFileSync(process.execPath, [join(import.meta.dirname, '../../scripts/build.mjs')], { stdio: 'inherit' });
}
