/**
 * The drain ends at ROWI_SHUTDOWN_TIMEOUT (http/draining.ts); this is the time left after it to
 * close the database and flush the log, before closing is given up on. A module of its own: the
 * primary of `--workers` needs it and nothing else of a serving process.
 */
export const CLOSING_MARGIN_MS = 2000;
