import { closeSync, openSync, readSync } from 'node:fs';

/**
 * Records read by id, kept in memory for the reads that follow (SQLite): a hot record is answered
 * without a read of the file, and never older than what has been committed.
 *
 * Whoever commits to the file (this process, another worker of `--workers`, another instance on
 * the same file, the import or webhook thread, a CLI command, any SQLite program) changes the
 * header of its write-ahead log's index (the `-shm` file, whose layout is part of SQLite's file
 * format), before its COMMIT returns. Every lookup reads that header first (one small read of a
 * file the operating system holds in memory) and forgets every record when it has changed. So a
 * caller that has been answered for a write reads what it wrote, whichever process it asks; and a
 * read that began before a commit does not keep what it read (the cache's generation, taken when
 * the read begins, has moved on).
 *
 * Bounded in bytes (an estimate of each record's size); the oldest records go first. On
 * PostgreSQL nothing tells an instance so cheaply that another has committed: every read asks the
 * database.
 */
export class ReadCache {
  readonly #maxBytes: number;
  readonly #changes: CommitWatch;
  #bytes = 0;
  /** The records kept, by `${table} ${id}`, oldest first. */
  readonly #records = new Map<string, Entry>();
  /** Counts the times everything was forgotten: a read keeps what it read only within one generation. */
  #generation = 0;
  #hits = 0;
  #misses = 0;

  /** @param maxBytes what the records kept may take (an estimate); 0 keeps none. */
  constructor(maxBytes: number, changes: CommitWatch) {
    this.#maxBytes = maxBytes;
    this.#changes = changes;
  }

  get enabled(): boolean {
    return this.#maxBytes > 0;
  }

  /** The record kept for this table and id, unless anything was committed since it was read. */
  get<Row>(table: string, id: number): Row | undefined {
    if (!this.enabled) return undefined;
    this.#current();
    const entry = this.#records.get(`${table} ${id}`);
    if (entry === undefined) {
      this.#misses += 1;
      return undefined;
    }
    this.#hits += 1;
    return entry.row as Row;
  }

  /** Taken before a read whose result may be kept (see keep). */
  generation(): number {
    this.#current();
    return this.#generation;
  }

  /** Keeps a record read by id, unless anything was committed since `generation` was taken. */
  keep(table: string, id: number, row: object, generation: number): void {
    this.#current();
    if (!this.enabled || generation !== this.#generation) return;
    const bytes = sizeOf(row);
    if (bytes > this.#maxBytes / 16) return;
    const key = `${table} ${id}`;
    const kept = this.#records.get(key);
    if (kept !== undefined) {
      this.#records.delete(key);
      this.#bytes -= kept.bytes;
    }
    this.#records.set(key, { row: Object.freeze(row), bytes });
    this.#bytes += bytes;
    for (const [oldest, entry] of this.#records) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#records.delete(oldest);
      this.#bytes -= entry.bytes;
    }
  }

  /** Records kept, their estimated bytes, and the lookups that found one or not. */
  stats(): { records: number; bytes: number; hits: number; misses: number } {
    return { records: this.#records.size, bytes: this.#bytes, hits: this.#hits, misses: this.#misses };
  }

  close(): void {
    this.#changes.close();
  }

  /** Forgets every record if anything was committed since the last look. */
  #current(): void {
    if (!this.#changes.changed()) return;
    this.#generation += 1;
    this.#records.clear();
    this.#bytes = 0;
  }
}

interface Entry {
  row: object;
  bytes: number;
}

/** Tells whether anything has been committed to a database since it was last asked. */
export interface CommitWatch {
  changed(): boolean;
  close(): void;
}

/**
 * The header of the write-ahead log's index of a SQLite file in WAL mode (its first 48 bytes, the
 * first copy of the header, which a committing connection writes last): it holds a counter of
 * transactions, the last valid frame and the log's salt, and so changes with every commit, and
 * whenever the log restarts (https://www.sqlite.org/walformat.html).
 */
const WAL_INDEX_HEADER_BYTES = 48;

/** Watches the `-shm` file of a SQLite database that a connection holds open in WAL mode. */
export function walIndexWatch(file: string): CommitWatch {
  const fd = openSync(`${file}-shm`, 'r');
  let seen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  let now = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  readSync(fd, seen, 0, WAL_INDEX_HEADER_BYTES, 0);
  return {
    changed() {
      readSync(fd, now, 0, WAL_INDEX_HEADER_BYTES, 0);
      if (now.equals(seen)) return false;
      [seen, now] = [now, seen];
      return true;
    },
    close: () => closeSync(fd),
  };
}

/** A record's size in memory, roughly: V8 keeps short strings at one byte a character, with headers. */
function sizeOf(row: object): number {
  let bytes = 64;
  for (const value of Object.values(row)) bytes += typeof value === 'string' ? 24 + value.length * 2 : 16;
  return bytes;
}
