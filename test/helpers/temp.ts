import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import './global-setup.js';

/** A new empty folder inside the run's temporary root (see global-setup.ts). */
export function tempFolder(prefix: string): string {
  return mkdtempSync(join(inject('tmpRoot'), `${prefix}-`));
}
