// Builds dist/ from src/ when a source changed since the last build, and does nothing otherwise:
// `npm start` runs it before every start, so a checkout whose build is current starts at once
// (a look at the files' times, where `tsc -b` takes a second or two to find nothing to do).
// The process tests' global setup runs it too (test/helpers/build-once.ts).
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const STAMP = join(ROOT, 'dist', '.built');
const INPUTS = ['src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];

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

if (Math.max(...INPUTS.map((input) => newest(join(ROOT, input)))) >= mtime(STAMP)) {
  const started = Date.now();
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'tsconfig.build.json')],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
  writeFileSync(STAMP, '');
  // The stamp is as new as the moment the build began: a source saved during the build is newer.
  utimesSync(STAMP, started / 1000, started / 1000);
}
