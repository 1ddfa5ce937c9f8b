import type { FastifyBaseLogger } from 'fastify';
import { faultOf } from '../observability/logger.js';
import type { Db } from '../db/database.js';
import { EVERYTHING, type Signals } from '../db/signals.js';
import type { Commits } from '../db/commits.js';
import { findEventsAfter, latestPosition, positionOf, type Position, type StoredEvent } from './outbox.repository.js';

/** The signal that tells the other processes and instances: events were committed. */
export const EVENTS_TOPIC = 'events';

/** A reader of the live feed: where it stands, what it may see, and where events go. */
export interface FeedReader {
  position: Position;
  /** The resources whose events it sees (its read scopes). */
  resources: ReadonlySet<string>;
  /** Only these types, when given. */
  types?: ReadonlySet<string>;
  /**
   * While true it is handed nothing: it stays where it is, and once it is false again (and the
   * feed woken) catches up from the table. Nothing waits for it in memory.
   */
  readonly paused?: boolean;
  /** Takes events, in order, and answers how many it took: the rest come again, from the table, when it is ready. */
  deliver(events: StoredEvent[]): number;
}

const BATCH = 500;
/** How often readers look without being woken: a signal may be lost, and on PostgreSQL an event waits for older transactions to end. */
const POLL_MS = 500;
/** Other processes are told at most this often (a PostgreSQL NOTIFY is a round trip). */
const SIGNAL_EVERY_MS = 20;
const ROUND_MS = 5;

/**
 * The outbox as it grows, for this process: woken after a local commit that wrote events, by the
 * signal of another process or instance, and by a poll; each wake reads the new events once and
 * hands each reader what it may see. A reader that starts behind (a stream resumed with
 * Last-Event-ID), or fell behind (it paused: a stream whose client reads slowly), catches up from
 * the table, in batches, before it joins.
 */
export class EventFeed {
  readonly #db: Db;
  readonly #signals: Signals;
  readonly #log: FastifyBaseLogger;
  readonly #readers = new Set<FeedReader>();
  readonly #wakeListeners = new Set<() => void>();
  readonly #unsubscribe: (() => void)[] = [];
  #head: Promise<Position> | undefined;
  #running = false;
  #again = false;
  #signalTimer: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(db: Db, commits: Commits, signals: Signals, log: FastifyBaseLogger) {
    this.#db = db;
    this.#signals = signals;
    this.#log = log;
    this.#unsubscribe.push(
      commits.onEventsCommitted(() => {
        this.wake();
        this.#signalOthers();
      }),
      signals.subscribe((topic) => {
        if (topic === EVENTS_TOPIC || topic === EVERYTHING) this.wake();
      }),
    );
  }

  /** Runs `listener` on every wake (the webhook dispatcher, the NATS publisher); returns the unsubscribe. */
  onWake(listener: () => void): () => void {
    this.#wakeListeners.add(listener);
    this.#ensurePoll();
    return () => this.#wakeListeners.delete(listener);
  }

  /** Adds a reader at its position; it is handed every later event it may see, in order. */
  async add(reader: FeedReader): Promise<() => void> {
    // Read nobody's events while it had no reader: it starts from the outbox's end again.
    if (this.#readers.size === 0 && !this.#running) this.#head = undefined;
    await this.#headPosition();
    this.#readers.add(reader);
    this.#ensurePoll();
    this.wake();
    return () => this.#readers.delete(reader);
  }

  get readers(): number {
    return this.#readers.size;
  }

  wake(): void {
    if (this.#closed) return;
    for (const listener of this.#wakeListeners) listener();
    if (this.#readers.size === 0) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    setImmediate(() => void this.#run());
  }

  close(): void {
    this.#closed = true;
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    clearTimeout(this.#signalTimer);
    clearInterval(this.#poll);
    this.#readers.clear();
  }

  #headPosition(): Promise<Position> {
    this.#head ??= latestPosition(this.#db);
    return this.#head;
  }

  #ensurePoll(): void {
    if (this.#poll !== undefined) return;
    this.#poll = setInterval(() => {
      if (this.#readers.size > 0 || this.#wakeListeners.size > 0) this.wake();
    }, POLL_MS);
    this.#poll.unref();
  }

  #signalOthers(): void {
    if (this.#signalTimer !== undefined) return;
    this.#signalTimer = setTimeout(() => {
      this.#signalTimer = undefined;
      this.#signals
        .publish(EVENTS_TOPIC)
        .catch((error: unknown) =>
          this.#db.outage.failed(this.#log, 'events-signal', error, 'could not tell other instances of new events'),
        );
    }, SIGNAL_EVERY_MS);
    this.#signalTimer.unref();
  }

  async #run(): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.#tick();
        // Under a stream of commits, a read at most every ROUND_MS: each takes every event since the last.
        if (this.#again) await new Promise((resolve) => setTimeout(resolve, ROUND_MS));
      } while (this.#again && !this.#closed);
    } catch (error) {
      this.#db.outage.failed(
        this.#log,
        'events-feed',
        error,
        `could not read new events: ${faultOf(error)}; trying again`,
      );
    } finally {
      this.#running = false;
    }
  }

  async #tick(): Promise<void> {
    const head = await this.#headPosition();
    const batch = await findEventsAfter(this.#db, head, { limit: BATCH });
    const next = batch.length > 0 ? positionOf(batch[batch.length - 1]!) : head;
    for (const reader of this.#readers) {
      if (reader.paused) continue;
      if (samePosition(reader.position, head)) {
        handOver(reader, batch, next);
        continue;
      }
      // Behind: catch up from the table, up to where the feed now stands.
      const rows = await findEventsAfter(this.#db, reader.position, {
        limit: BATCH,
        upTo: next,
        resources: [...reader.resources],
        ...(reader.types ? { types: [...reader.types] } : {}),
      });
      if (reader.paused) continue;
      const tookAll = handOver(reader, rows, rows.length === BATCH ? positionOf(rows[rows.length - 1]!) : next);
      if (rows.length === BATCH && tookAll) this.#again = true;
    }
    this.#head = Promise.resolve(next);
    if (batch.length === BATCH) this.#again = true;
  }
}

/** Hands the reader what it may see of `events`, and moves it to `next`; false when it took only part (it stands after the last it took). */
function handOver(reader: FeedReader, events: StoredEvent[], next: Position): boolean {
  const visible = events.filter(
    (event) => reader.resources.has(event.resource) && (reader.types === undefined || reader.types.has(event.type)),
  );
  // A reader that started ahead of the feed (a stream opened while the feed was idle) waits for it.
  if (isBefore(next, reader.position)) return true;
  const taken = visible.length === 0 ? 0 : reader.deliver(visible);
  if (taken < visible.length) {
    if (taken > 0) reader.position = positionOf(visible[taken - 1]!);
    return false;
  }
  reader.position = next;
  return true;
}

function isBefore(a: Position, b: Position): boolean {
  return a.txid < b.txid || (a.txid === b.txid && a.seq < b.seq);
}

function samePosition(a: Position, b: Position): boolean {
  return a.txid === b.txid && a.seq === b.seq;
}
