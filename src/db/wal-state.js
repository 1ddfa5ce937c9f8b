// @ts-check
import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';

/** Where the wal-index (the `-shm` file) keeps mxFrame and nBackfill (sqlite.org/walformat.html, 2.2). */
const HEADER_BYTES = 48;
const MAX_FRAME = 16;
const BACKFILL = 2 * HEADER_BYTES;
const bytes = Buffer.alloc(BACKFILL + 4);
const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);

/**
 * How many frames of a SQLite file's write-ahead log no checkpoint has copied back yet, read from
 * its wal-index (in the host's byte order); 0 when there is none. While a writer changes the
 * index (its two copies of the header differ), it answers as if nothing were pending: the next
 * look tells. Read by checkpoints.ts to start its thread only once the log needs a checkpoint.
 * @param {string} file the database file
 * @returns {number}
 */
export function walPending(file) {
  let descriptor;
  try {
    descriptor = openSync(`${file}-shm`, 'r');
  } catch {
    return 0;
  }
  try {
    if (readSync(descriptor, bytes, 0, bytes.length, 0) < bytes.length) return 0;
  } finally {
    closeSync(descriptor);
  }
  if (!bytes.subarray(0, HEADER_BYTES).equals(bytes.subarray(HEADER_BYTES, BACKFILL))) return 0;
  const littleEndian = endianness() === 'LE';
  return Math.max(0, view.getUint32(MAX_FRAME, littleEndian) - view.getUint32(BACKFILL, littleEndian));
}
