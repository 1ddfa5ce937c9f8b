import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config/config.js';

/**
 * Bounds how far V8 lets the old generation grow before it collects it (docs/performance.md
 * "Memory"). By its own rule V8 lets it grow to up to 4 times what its last full collection left
 * alive, and a long export or import, which only promotes a little of what it allocates at each
 * young collection, runs no full collection at all: 1,000,000 orders exported grew rowi's RSS by
 * 47–138 MB, an import of 100,000 items by 97 MB. With 20 %, V8 collects once the old generation
 * has grown by a fifth (or by its minimum step, 8 MB): +33 MB and +44 MB, for a few percent of
 * CPU under an orders load. V8's flags are the process's, so one call covers every thread.
 */
export function boundHeapGrowth(config: Pick<Config, 'heapGrowingPercent'>): void {
  if (config.heapGrowingPercent > 0) setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
}
