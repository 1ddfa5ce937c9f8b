import { codeOf } from './driver-errors.js';

/**
 * Waiting for SQLite's write lock while another process holds it (two processes on one file:
 * `--workers`, or a CLI command beside the server). SQLite's own busy timeout would sleep on the
 * event loop, so the writer and reader connections have none: the attempt is made again after a
 * short, growing pause that lets requests and reads go on, until the lock timeout; then
 * SQLITE_BUSY reaches the caller (503 with Retry-After).
 */

/**
 * Shared by the threads of this process that write to its SQLite file (the main thread's writer
 * and the webhook thread's: process/webhook-thread.ts): [0] counts the write transactions they
 * ended, [1] the main thread's writers waiting for the lock. A writer that found the lock held by
 * another thread tries again as soon as that thread ends its transaction, instead of after its
 * pause; and a thread that yields (the webhook thread) lets a waiting main thread go first, and
 * ends its own group as soon as one waits: requests never queue behind webhook bookkeeping.
 */
const RELEASED = 0;
const WAITING = 1;
let shared = new Int32Array(new SharedArrayBuffer(8));
let yields = false;

/** The shared memory, handed to a thread of this process that opens the same file. */
export function writeLockReleases(): SharedArrayBuffer {
  return shared.buffer as SharedArrayBuffer;
}

/** In a thread that yields the write lock to the main thread: uses the memory its process handed it (writeLockReleases). */
export function shareWriteLockReleases(buffer: SharedArrayBuffer): void {
  shared = new Int32Array(buffer);
  yields = true;
}

/** Said by a writer after each COMMIT or ROLLBACK: the threads of the process waiting for the lock try again. */
export function writeLockReleased(): void {
  Atomics.add(shared, RELEASED, 1);
  Atomics.notify(shared, RELEASED);
}

/** Whether this thread yields the write lock and the main thread waits for it now: its group should end. */
export function othersWaitForWriteLock(): boolean {
  return yields && Atomics.load(shared, WAITING) > 0;
}

/** Pauses between attempts at a locked database: short at first (most locks are held for milliseconds), never long. */
const FIRST_PAUSE_MS = 1;
const LONGEST_PAUSE_MS = 25;

/**
 * Runs `attempt`, again after a pause while it finds the database locked by another process
 * (SQLITE_BUSY), until the lock timeout; the pause does not hold up the event loop.
 */
export async function whenUnlocked<T>(attempt: () => T, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let waiting = false;
  try {
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
      const released = Atomics.load(shared, RELEASED);
      if (!othersWaitForWriteLock() || performance.now() + pause > deadline) {
        try {
          return attempt();
        } catch (error) {
          if (!isBusy(error) || performance.now() + pause > deadline) throw error;
        }
        if (!yields && !waiting) {
          waiting = true;
          Atomics.add(shared, WAITING, 1);
        }
      }
      // The pause, or less when a thread of this process ends its transaction meanwhile.
      const wait = (Atomics as unknown as AsyncAtomics).waitAsync(shared, RELEASED, released, pause);
      if (wait.async) await wait.value;
    }
  } finally {
    if (waiting) Atomics.sub(shared, WAITING, 1);
  }
}

/** Atomics.waitAsync (Node 16 and later), not in the ES2022 library TypeScript is given. */
interface AsyncAtomics {
  waitAsync(
    array: Int32Array,
    index: number,
    value: number,
    timeoutMs: number,
  ): { async: false; value: string } | { async: true; value: Promise<string> };
}

function isBusy(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}
