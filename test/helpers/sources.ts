import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/** The source folder, for the tests of the code's own rules (test/structure/). */
export const SOURCES = join(import.meta.dirname, '../../src');

/** The console's source folder (a client of the API, beside src/: docs/architecture.md). */
export const CONSOLE_SOURCES = join(import.meta.dirname, '../../console/src');

/** Every .ts, .tsx and .js file under `folder`, at any depth. */
export function sourcesOf(folder: string = SOURCES): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourcesOf(path);
    return /\.(ts|tsx|js)$/.test(entry.name) ? [path] : [];
  });
}
