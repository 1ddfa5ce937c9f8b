import type { Db } from '../db/database.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { takeLease } from './outbox.repository.js';

/**
 * The lease that makes one process of a deployment the consumer of the outbox for one purpose
 * (webhooks, the NATS bus): a row of event_cursors naming its holder until a time. The holder
 * renews it as it works; when it stops, another process takes it over once it has run out.
 */
export class Lease {
  readonly #db: Db;
  readonly #name: string;
  readonly #owner: string;
  readonly #lengthMs: number;
  #until = 0;
  #retryAt = 0;

  constructor(db: Db, name: string, owner: string, lengthMs: number) {
    this.#db = db;
    this.#name = name;
    this.#owner = owner;
    this.#lengthMs = lengthMs;
  }

  get owner(): string {
    return this.#owner;
  }

  /** Milliseconds before a process that does not hold the lease should ask again. */
  get retryMs(): number {
    return this.#lengthMs / 3;
  }

  /** Whether this process holds the lease now, renewing it when a third of it is left. */
  async held(): Promise<boolean> {
    const now = Date.now();
    if (this.#until - now > this.#lengthMs / 3) return true;
    if (now < this.#retryAt) return false;
    const until = now + this.#lengthMs;
    const held = await unitOfWork(this.#db, (trx) => takeLease(trx, this.#name, this.#owner, new Date(now).toISOString(), new Date(until).toISOString()));
    this.#until = held ? until : 0;
    if (!held) this.#retryAt = now + this.retryMs;
    return held;
  }
}
