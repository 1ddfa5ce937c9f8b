import { randomBytes } from 'node:crypto';

/**
 * Event ids: `evt_` and 28 hexadecimal digits, beginning with the time the event was made. They
 * sort by that time, so the time is not stored beside the id, and a range of times is a range of
 * ids (the listing's created_after/created_before, the pruning).
 */

/** This process's part of every event id: two instances never make the same id. */
const NODE = randomBytes(5).toString('hex');
let lastMs = 0;
let counter = 0;
/** `evt_` and lastMs in hex: the part of the ids of one millisecond they share (an import's chunk makes thousands). */
let prefix = 'evt_000000000000';

/**
 * `evt_` and 28 hex digits: the time in milliseconds (12), a counter (6), this process's random
 * part (10). Ids sort by the time they were made; within a process, in the order they were made
 * (a clock that steps back does not reorder them).
 */
export function nextEventId(): string {
  const ms = Math.max(Date.now(), lastMs);
  if (ms !== lastMs) {
    lastMs = ms;
    counter = 0;
    prefix = `evt_${lastMs.toString(16).padStart(12, '0')}`;
  } else if (++counter > 0xffffff) {
    lastMs = ms + 1;
    counter = 0;
    prefix = `evt_${lastMs.toString(16).padStart(12, '0')}`;
  }
  return `${prefix}${(0x1000000 + counter).toString(16).slice(1)}${NODE}`;
}

export const EVENT_ID_PATTERN = '^evt_[0-9a-f]{28}$';

/** When an event was made: the time its id begins with, as rowi writes timestamps. */
export function timeOfEventId(id: string): string {
  return new Date(parseInt(id.slice(4, 16), 16)).toISOString();
}

/**
 * The greatest id an event made at `timestamp` (rowi's stored form) or before can have, and the
 * least one made after it: a time bound on events as a bound on ids.
 */
export function lastEventIdAt(timestamp: string): string {
  return `evt_${Date.parse(timestamp).toString(16).padStart(12, '0')}${'f'.repeat(16)}`;
}
export function firstEventIdAt(timestamp: string): string {
  return `evt_${Date.parse(timestamp).toString(16).padStart(12, '0')}${'0'.repeat(16)}`;
}
