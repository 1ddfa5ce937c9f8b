import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config/config.js';

/**
 * V8's heap as rowi runs it (docs/performance.md "Memory"); V8's flags are the process's, so one
 * call covers every thread.
 *
 * - How far the old generation may grow before it is collected. By its own rule V8 lets it grow
 *   to up to 4 times what its last full collection left alive, and a long export or import, which
 *   only promotes a little of what it allocates at each young collection, runs no full collection
 *   at all: 1,000,000 orders exported grew rowi's RSS by 47–138 MB, an import of 100,000 items by
 *   97 MB. With 20 %, V8 collects once the old generation has grown by a fifth (or by its minimum
 *   step, 8 MB): +33 MB and +44 MB, for a few percent of CPU under an orders load.
 * - No allocation-site pretenuring. Where the objects made at one place in the code outlive young
 *   collections (a write's, held for its group's COMMIT), V8 starts making them in the old
 *   generation, for every later request that runs that code too: after a few seconds of writes,
 *   reads cost 1.4–1.6 times the CPU, their young collections four times as long and their full
 *   ones four times as many, until the process restarts. Without it an order costs 0.94 times the
 *   CPU, an imported row 1.01–1.08 times (the import thread's chunks are the objects that do live).
 */
export function tuneHeap(config: Pick<Config, 'heapGrowingPercent'>): void {
  if (config.heapGrowingPercent > 0) setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  setFlagsFromString('--no-allocation-site-pretenuring');
}
