import { codeOf } from './driver-errors.js';

/**
 * Waiting for SQLite's write lock while another process holds it (two processes on one file:
 * `--workers`, or a CLI command beside the server). SQLite's own busy timeout would sleep on the
 * event loop, so the writer and reader connections have none: the attempt is made again after a
 * short, growing pause that lets requests and reads go on, until the lock timeout; then
 * SQLITE_BUSY reaches the caller (503 with Retry-After).
 */

/** Pauses between attempts at a locked database: short at first (most locks are held for milliseconds), never long. */
const FIRST_PAUSE_MS = 1;
const LONGEST_PAUSE_MS = 25;

/**
 * Runs `attempt`, again after a pause while it finds the database locked by another process
 * (SQLITE_BUSY), until the lock timeout; the pause does not hold up the event loop.
 */
export async function whenUnlocked<T>(attempt: () => T, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error) || performance.now() + pause > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

function isBusy(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}
