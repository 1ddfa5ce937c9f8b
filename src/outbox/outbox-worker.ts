import { isCorruption } from '../db/driver-errors.js';

/** What wakes a consumer of the outbox: the event feed of its process (feed.ts), or the messages of the thread that has it (process/webhook-thread.ts). */
export interface Wakes {
  onWake(listener: () => void): () => void;
}

/** Between two rounds of work while commits keep waking it (unless told otherwise): each round takes everything since the last. */
const ROUND_EVERY_MS = 10;

/**
 * A consumer of the outbox that works in rounds (the webhook dispatcher, the NATS bus): woken by
 * the feed (new events, and its poll), or by itself at a time it chose (a retry that is due). Wakes
 * that come while a round runs are folded into one more round, so it never runs twice at once.
 */
export abstract class OutboxWorker {
  readonly #feed: Wakes;
  readonly #roundEveryMs: number;
  #running = false;
  #again = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;

  constructor(feed: Wakes, roundEveryMs = ROUND_EVERY_MS) {
    this.#feed = feed;
    this.#roundEveryMs = roundEveryMs;
  }

  /** One round of work; `false` stops the rounds until the next wake (this process holds no lease). */
  protected abstract round(): Promise<boolean>;
  /** After the rounds, when they all went through. */
  protected abstract settled(): Promise<void>;
  /** A round threw: what to do about it (log, and wake again later). */
  protected abstract failed(error: unknown): Promise<void>;

  start(): void {
    this.#unsubscribe = this.#feed.onWake(() => this.wake());
    this.wake();
  }

  wake(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    setImmediate(() => void this.#run());
  }

  /** Stops waking and waits for the round in progress. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe?.();
    clearTimeout(this.#timer);
    while (this.#running) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  protected get closed(): boolean {
    return this.#closed;
  }

  /** Wakes after `ms`, instead of any wake planned before. */
  protected later(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.wake(), Math.min(ms, 2 ** 31 - 1));
    this.#timer.unref();
  }

  async #run(): Promise<void> {
    try {
      let more = true;
      do {
        this.#again = false;
        more = await this.round();
        if (more && this.#again) await new Promise((resolve) => setTimeout(resolve, this.#roundEveryMs));
      } while (more && this.#again && !this.#closed);
      if (more) await this.settled();
    } catch (error) {
      // Damage is logged once where it is found (db/corruption.ts); rounds refused for it are not, at every poll.
      if (!isCorruption(error)) await this.failed(error);
    } finally {
      this.#running = false;
    }
  }
}
