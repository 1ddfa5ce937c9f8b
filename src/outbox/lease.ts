import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db, Trx } from '../db/database.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { cursorOf, takeLease } from './outbox.repository.js';

/**
 * The lease that makes one process of a deployment the consumer of the outbox for one purpose
 * (webhooks, the NATS bus): a row of event_cursors naming its holder until a time. The holder
 * renews it as it works (and the webhook dispatcher on a heartbeat, `beat`, every second, with a
 * short lease); when it stops, another process takes it over once it has run out, or at once
 * when the holder was a process of this host that is no longer running (a crash, kill -9, a
 * restart after either): a holder is named `host:pid:random` (leaseHolderName). Whoever takes the
 * lease from another holder runs `onTakeOver` with that holder's name in the same unit of work.
 */
export class Lease {
  readonly #db: Db;
  readonly #name: string;
  readonly #owner: string;
  readonly #lengthMs: number;
  readonly #onTakeOver: ((trx: Trx, previous: string) => Promise<void>) | undefined;
  #until = 0;
  #retryAt = 0;

  /** `onTakeOver` runs in the unit of work that takes the lease from a holder that died. */
  constructor(
    db: Db,
    name: string,
    owner: string,
    lengthMs: number,
    onTakeOver?: (trx: Trx, previous: string) => Promise<void>,
  ) {
    this.#db = db;
    this.#name = name;
    this.#owner = owner;
    this.#lengthMs = lengthMs;
    this.#onTakeOver = onTakeOver;
  }

  get owner(): string {
    return this.#owner;
  }

  /** Milliseconds before a process that does not hold the lease should ask again. */
  get retryMs(): number {
    return Math.min(this.#lengthMs / 3, 1000);
  }

  /** Whether this process held the lease when it last looked, and the lease has not run out since (no database work). */
  heldNow(): boolean {
    return this.#until > Date.now();
  }

  /** The heartbeat: renews the lease now when this process holds it, or tries to take it when it is due to ask. */
  beat(): Promise<boolean> {
    return this.held(this.#lengthMs);
  }

  /** Whether this process holds the lease now, renewing it when less than `renewBelowMs` of it is left (a third). */
  async held(renewBelowMs = this.#lengthMs / 3): Promise<boolean> {
    const now = Date.now();
    if (this.#until - now > renewBelowMs) return true;
    if (now < this.#retryAt) return false;
    const until = now + this.#lengthMs;
    const held = await unitOfWork(this.#db, async (trx) => {
      const holder = (await cursorOf(trx, this.#name)).lease_owner;
      const gone = holder !== null && holder !== this.#owner && diedOnThisHost(holder) ? holder : undefined;
      const previous = holder !== null && holder !== this.#owner ? holder : undefined;
      const taken = await takeLease(
        trx,
        this.#name,
        this.#owner,
        new Date(now).toISOString(),
        new Date(until).toISOString(),
        gone,
      );
      if (taken && previous !== undefined) await this.#onTakeOver?.(trx, previous);
      return taken;
    });
    // A renewal that throws (the database away) leaves the lease as it was: it still runs out when it would have.
    this.#until = held ? until : 0;
    if (!held) this.#retryAt = now + this.retryMs;
    return held;
  }
}

/** This process's name as a lease holder: its host, its pid (which diedOnThisHost reads back) and a random part, unique per process start. */
export function leaseHolderName(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * Whether a lease holder (`host:pid:random`, leaseHolderName) was a process of this host that no longer runs.
 * Only a definite answer counts: another host, this very process (another app in it), a process
 * that runs (or whose pid runs something else now) or one this user may not signal is taken to
 * be alive, and its lease runs out as usual.
 */
export function diedOnThisHost(holder: string): boolean {
  const match = /^(.+):(\d+):[0-9a-f]+$/.exec(holder);
  if (match === null || match[1] !== hostname()) return false;
  const pid = Number(match[2]);
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
