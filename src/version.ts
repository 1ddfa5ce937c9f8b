import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** rowi's version, from the package.json above this file (in src/ and in dist/src/ alike). */
function readVersion(): string {
  let folder = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 4; depth++) {
    try {
      const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (manifest.name === 'rowi' && manifest.version) return manifest.version;
    } catch {
      // not here; look one folder up
    }
    folder = dirname(folder);
  }
  return '0.0.0';
}

export const VERSION = readVersion();
