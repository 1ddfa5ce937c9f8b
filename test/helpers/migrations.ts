import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/** The names of rowi's migrations (src/db/migrations/NNNN-what.ts), in the order they are applied. */
export function migrationNames(): string[] {
  return readdirSync(join(import.meta.dirname, '../../src/db/migrations'))
    .filter((name) => /^\d{4}-.+\.ts$/.test(name))
    .sort()
    .map((name) => name.slice(0, -'.ts'.length));
}
