/**
 * The deliveries the webhook dispatcher made in memory and has not written yet, and what the
 * webhooks' cursor may say of them. A delivery that its endpoint has room for goes from the fan-out
 * to its receiver with no row; its row is written once, with its outcome (a success is then one
 * row, written already succeeded). Until then the cursor stays before its event: a process that
 * takes the dispatcher over reads the event again and sends it again (at least once). Nothing here
 * reads or writes the database.
 */
import type { NewDelivery, StoredDelivery } from './deliveries.repository.js';
import type { Position } from './outbox.repository.js';

/** One fan-out's events: how far they reach, and how many of their deliveries are not written yet. */
interface FannedOut {
  to: Position;
  unwritten: number;
}

export class DeliveriesInMemory {
  /** Temporary ids, below any row's: a delivery in memory is known by one until its row is written. */
  #nextId = -Number.MAX_SAFE_INTEGER;
  readonly #unwritten = new Map<number, { delivery: StoredDelivery; batch: FannedOut }>();
  readonly #batches: FannedOut[] = [];
  /** Where the fan-out has read to (undefined: from the cursor, as stored). */
  fannedTo: Position | undefined;
  /** The cursor as this process last wrote it, or read it. */
  #written: Position | undefined;
  /**
   * By endpoint and resource, of resources with deliveries in memory: the last sequence given, and
   * how many of them are unwritten. Of the others, the rows kept say it (and their pruning restarts
   * the count).
   */
  readonly #sequences = new Map<string, { last: number; unwritten: number }>();
  /** Resources numbered by the fan-out under way: forgotten after it unless a delivery of theirs stays in memory. */
  readonly #numbered = new Set<string>();

  static isTemporary(id: number): boolean {
    return id < 0;
  }

  /** Forgets everything (the lease lost, a failure): the next fan-out starts from the cursor as stored. */
  reset(): void {
    this.#unwritten.clear();
    this.#batches.length = 0;
    this.fannedTo = undefined;
    this.#written = undefined;
    this.#sequences.clear();
    this.#numbered.clear();
  }

  /** The cursor as this process last stored it (or read it). */
  get cursor(): Position | undefined {
    return this.#written;
  }

  /** The fan-out starts from the stored cursor. */
  startAt(cursor: Position): void {
    this.fannedTo = cursor;
    this.#written = cursor;
  }

  /** The resources of an endpoint whose last sequence is to be read from the rows kept: those with nothing in memory. */
  unknownSequences(endpointId: number, resources: Iterable<string>): string[] {
    return [...resources].filter((resource) => !this.holds(endpointId, resource));
  }

  learnSequence(endpointId: number, resource: string, last: number): void {
    if (!this.holds(endpointId, resource)) this.#sequences.set(`${endpointId} ${resource}`, { last, unwritten: 0 });
  }

  /** Numbers the deliveries (in outbox order) after the last sequence known of their resources. */
  number(deliveries: NewDelivery[]): void {
    for (const delivery of deliveries) {
      const key = `${delivery.endpoint_id} ${delivery.resource_key}`;
      const known = this.#sequences.get(key) ?? { last: 0, unwritten: 0 };
      this.#numbered.add(key);
      known.last++;
      delivery.sequence = known.last;
      this.#sequences.set(key, known);
    }
  }

  /** Whether a delivery of this resource of the endpoint waits in memory unwritten: a later one then stays in memory too, behind it. */
  holds(endpointId: number, resource: string): boolean {
    return (this.#sequences.get(`${endpointId} ${resource}`)?.unwritten ?? 0) > 0;
  }

  /** Where a fan-out that read events up to `to` and keeps `kept` deliveries in memory may store the cursor. */
  cursorWith(to: Position, kept: number): Position {
    const cursor = this.cursorAfter([]);
    return kept === 0 && this.#batches.every((batch) => batch.unwritten === 0) ? to : cursor;
  }

  /**
   * A fan-out read events up to `to` and stored the cursor at `cursor`; `kept` are the deliveries
   * it keeps in memory, given temporary ids here.
   */
  fannedOut(to: Position, cursor: Position, kept: NewDelivery[]): StoredDelivery[] {
    const batch = { to, unwritten: kept.length };
    // One that keeps nothing is remembered behind one that does: the cursor passes both together.
    if (kept.length > 0 || this.#batches.length > 0) this.#batches.push(batch);
    this.fannedTo = to;
    this.#written = cursor;
    const deliveries = kept.map((delivery) => {
      const stored = { ...delivery, id: this.#nextId++ };
      this.#unwritten.set(stored.id, { delivery: stored, batch });
      const known = this.#sequences.get(`${delivery.endpoint_id} ${delivery.resource_key}`);
      if (known) known.unwritten++;
      return stored;
    });
    for (const key of this.#numbered) if (this.#sequences.get(key)?.unwritten === 0) this.#sequences.delete(key);
    this.#numbered.clear();
    return deliveries;
  }

  /** A delivery in memory (by its temporary id), or undefined when its row is written or it was dropped. */
  get(id: number): StoredDelivery | undefined {
    return this.#unwritten.get(id)?.delivery;
  }

  /** The deliveries in memory, as `endpoint_id event_id`. */
  keys(): Set<string> {
    const keys = new Set<string>();
    for (const { delivery } of this.#unwritten.values()) keys.add(`${delivery.endpoint_id} ${delivery.event_id}`);
    return keys;
  }

  /** Where the cursor may be stored once these deliveries' rows are written (or they are dropped). */
  cursorAfter(ids: readonly number[]): Position {
    const counts = new Map<FannedOut, number>();
    for (const id of ids) {
      const entry = this.#unwritten.get(id);
      if (entry) counts.set(entry.batch, (counts.get(entry.batch) ?? 0) + 1);
    }
    let cursor = this.#written!;
    for (const batch of this.#batches) {
      if (batch.unwritten - (counts.get(batch) ?? 0) > 0) break;
      cursor = batch.to;
    }
    return cursor;
  }

  /** These deliveries' rows are written, and the cursor stored at `cursor`. */
  written(ids: readonly number[], cursor: Position): void {
    this.drop(ids);
    while (this.#batches.length > 0 && this.#batches[0]!.unwritten === 0) this.#batches.shift();
    this.#written = cursor;
  }

  /** These deliveries are not sent by this process, nor written (their endpoint is gone, or it closes). */
  drop(ids: readonly number[]): void {
    for (const id of ids) {
      const entry = this.#unwritten.get(id);
      if (entry === undefined) continue;
      this.#unwritten.delete(id);
      entry.batch.unwritten--;
      const key = `${entry.delivery.endpoint_id} ${entry.delivery.resource_key}`;
      const known = this.#sequences.get(key);
      // A resource the fan-out under way has numbered keeps its count until that fan-out says what
      // it kept (fannedOut): its outcomes are written meanwhile, and a delivery it keeps must count.
      if (known && --known.unwritten <= 0 && !this.#numbered.has(key)) this.#sequences.delete(key);
    }
  }
}
