import cluster from 'node:cluster';
import { createHash } from 'node:crypto';
import { MemoryStore, type Decision } from './memory-store.js';
import type { RedisStore } from './rate-limit-stores.js';

/**
 * Failed authentications, counted for the whole deployment rather than per process
 * (docs/security.md "Failed authentication"), per subject: the client address a guess came from,
 * and what it was aimed at (an API key's public prefix, an OAuth client id), so that a guesser
 * spends the budget of what it guesses at from every address, and a shared address is not the
 * only thing that can be refused.
 *
 * - the process group counts them: in memory when rowi runs as one process; with `--workers`, in
 *   the primary, which each worker tells of each failure (IPC) and which tells every worker when a
 *   subject has spent its budget;
 * - with ROWI_REDIS_URL, Redis counts them too, for every instance; the instance whose failure
 *   spends the budget says so on a Redis channel, which every process of every instance hears.
 *
 * Credentials proven valid (a request they authenticated succeeded, or rowi issued them) are
 * remembered by a digest, told to the other processes the same ways, and pass a subject's refusal
 * to be checked as usual: a valid key is not locked out of an address someone else spends, nor a
 * key out of its own prefix's budget; a guess passes only by being such a credential.
 *
 * The check before credentials are read is a look-up in this process's own memory (the subjects
 * refused, and until when; the proven digests): no request waits on the primary or on Redis; only
 * a failure costs a message, and past half the budget its 401 is held back 250 ms anyway, far
 * longer than the word takes to reach the others. While Redis cannot be reached the group's count
 * still holds, so the budget is then one per instance: fail safe, never unlimited. The primary
 * answering a worker within ANSWER_MS is not awaited longer: the worker's own count (a lower
 * bound) decides then.
 */

/** How long a worker waits for the primary's count of a failure before it goes by its own. */
const ANSWER_MS = 250;
/** Subjects remembered as refused at most; at the cap the oldest goes, as in the memory store. */
const BLOCKED_KEYS = 100_000;
/**
 * Proven credentials remembered at most (by digest, about 100 bytes each), and for how long since
 * they were last proven; those this process proved itself are also kept by themselves (a token is
 * about 600 bytes), fewer: one that falls out is digested and told again at its next use.
 */
const PROVEN_KEYS = 100_000;
const PROVEN_HERE_KEYS = 10_000;
const PROVEN_MS = 24 * 60 * 60 * 1000;
/** A credential proven again is told to the other processes again at most this often (one that started since learns it). */
const ANNOUNCE_MS = 10 * 60 * 1000;

type FailureMessage =
  | { type: 'rowi:auth-failure'; id: number; subject: string; quota: number; windowMs: number }
  | { type: 'rowi:auth-failure-counted'; id: number; decision: Decision }
  | { type: 'rowi:auth-blocked'; subject: string; forMs: number }
  | { type: 'rowi:auth-proven'; digest: string };

const isFailureMessage = (message: unknown): message is FailureMessage =>
  typeof message === 'object' &&
  message !== null &&
  ['rowi:auth-failure', 'rowi:auth-failure-counted', 'rowi:auth-blocked', 'rowi:auth-proven'].includes(
    (message as { type?: string }).type ?? '',
  );

/** How long a decision leaves the subject refused: until the bucket holds one request again. */
export function blockedForMs(decision: Decision, quota: number, windowMs: number): number {
  if (!decision.allowed) return decision.retryMs;
  if (decision.remaining > 0) return 0;
  return Math.max(0, decision.resetMs + windowMs / quota - windowMs);
}

/** The more restrictive of two decisions on one request. */
function stricter(first: Decision, second: Decision | undefined): Decision {
  if (second === undefined) return first;
  if (first.allowed !== second.allowed) return first.allowed ? second : first;
  return second.remaining < first.remaining || second.retryMs > first.retryMs ? second : first;
}

/** What a proven credential is remembered and told by: never the credential itself. */
const digestOf = (credential: string) =>
  createHash('sha256').update('rowi proven credential\n').update(credential).digest('base64url');

/**
 * In the primary of `rowi serve --workers N`: counts every worker's failed authentications in one
 * store, answers the worker, tells every worker when a subject has spent its budget, and passes a
 * credential one worker proved on to the others.
 */
export function countWorkerAuthFailures(): void {
  const store = new MemoryStore();
  const sweep = setInterval(() => store.sweep(), 60_000);
  sweep.unref();
  const toEvery = (message: FailureMessage, except?: number) => {
    for (const each of Object.values(cluster.workers ?? {}))
      if (each?.isConnected() && each.id !== except) each.send(message);
  };
  cluster.on('message', (worker, message: unknown) => {
    if (!isFailureMessage(message)) return;
    if (message.type === 'rowi:auth-proven') return toEvery(message, worker.id);
    if (message.type !== 'rowi:auth-failure') return;
    const decision = store.take(message.subject, message.quota, message.windowMs);
    const forMs = blockedForMs(decision, message.quota, message.windowMs);
    // Every worker hears of the block before the worker that counted it can answer its 401.
    if (forMs > 0) toEvery({ type: 'rowi:auth-blocked', subject: message.subject, forMs });
    if (worker.isConnected())
      worker.send({ type: 'rowi:auth-failure-counted', id: message.id, decision } satisfies FailureMessage);
  });
}

export class AuthFailures {
  readonly #quota: number;
  readonly #windowMs: number;
  /** This process's own count: the group's when alone, a lower bound of it in a worker. */
  readonly #own = new MemoryStore();
  /** Subjects refused, until when (this process's clock, milliseconds). */
  readonly #blocked = new Map<string, number>();
  /** Digests of proven credentials, until when. */
  readonly #proven = new Map<string, number>();
  /** Credentials this process proved, by themselves (no digest to compute per request), and when it last told the others. */
  readonly #provenHere = new Map<string, number>();
  readonly #redis: RedisStore | undefined;
  readonly #worker = cluster.isWorker && typeof process.send === 'function';
  readonly #waiting = new Map<number, (decision: Decision | undefined) => void>();
  #nextId = 0;
  readonly #onMessage = (message: unknown) => {
    if (!isFailureMessage(message)) return;
    if (message.type === 'rowi:auth-blocked') this.#block(message.subject, message.forMs);
    else if (message.type === 'rowi:auth-proven') this.#remember(message.digest);
    else if (message.type === 'rowi:auth-failure-counted') this.#waiting.get(message.id)?.(message.decision);
  };
  readonly #unsubscribe: (() => void) | undefined;

  constructor(quota: number, windowMs: number, redis: RedisStore | undefined) {
    this.#quota = quota;
    this.#windowMs = windowMs;
    this.#redis = redis;
    if (this.#worker) process.on('message', this.#onMessage);
    this.#unsubscribe = redis?.onAnnouncements({
      'failed-auth': ({ subject, forMs }) => {
        if (typeof subject === 'string' && typeof forMs === 'number') this.#block(subject, forMs);
      },
      'auth-proven': ({ digest }) => {
        if (typeof digest === 'string') this.#remember(digest);
      },
    });
  }

  /** Milliseconds the subject is still refused for; 0 when it may try. */
  refusedForMs(subject: string, now = Date.now()): number {
    const until = this.#blocked.get(subject);
    if (until === undefined) return 0;
    if (until > now) return until - now;
    this.#blocked.delete(subject);
    return 0;
  }

  /** Counts a failed authentication against each subject, everywhere it is counted; the strictest count decides. */
  record(subjects: readonly string[]): Decision | Promise<Decision> {
    const decisions = subjects.map((subject) => this.#recordOne(subject));
    if (decisions.every((decision) => !(decision instanceof Promise)))
      return (decisions as Decision[]).reduce((strictest, decision) => stricter(strictest, decision));
    return Promise.all(decisions).then((all) => all.reduce((strictest, decision) => stricter(strictest, decision)));
  }

  #recordOne(subject: string): Decision | Promise<Decision> {
    const own = this.#own.take(subject, this.#quota, this.#windowMs);
    this.#block(subject, blockedForMs(own, this.#quota, this.#windowMs));
    if (!this.#worker && this.#redis === undefined) return own;
    return Promise.all([this.#askPrimary(subject), this.#askRedis(subject)]).then(([group, shared]) =>
      stricter(stricter(own, group), shared),
    );
  }

  /**
   * A credential that authenticated a request (or that rowi issued): remembered, and told to the
   * other processes and instances when this process has not told them lately.
   */
  prove(credential: string, now = Date.now()): void {
    const told = this.#provenHere.get(credential);
    if (told !== undefined && now - told < ANNOUNCE_MS) return;
    if (told === undefined && this.#provenHere.size >= PROVEN_HERE_KEYS)
      this.#provenHere.delete(this.#provenHere.keys().next().value as string);
    this.#provenHere.set(credential, now);
    const digest = digestOf(credential);
    this.#remember(digest, now);
    if (this.#worker) process.send!({ type: 'rowi:auth-proven', digest } satisfies FailureMessage);
    this.#redis?.announce('auth-proven', { digest });
  }

  /** Whether the credential was proven valid lately (here or anywhere that told this process). */
  isProven(credential: string, now = Date.now()): boolean {
    if (this.#provenHere.has(credential)) return true;
    const until = this.#proven.get(digestOf(credential));
    return until !== undefined && until > now;
  }

  /** A credential that failed its check (revoked, expired): no longer let past a refusal by this process. */
  disprove(credential: string): void {
    this.#provenHere.delete(credential);
    this.#proven.delete(digestOf(credential));
  }

  #askPrimary(subject: string): Promise<Decision | undefined> {
    if (!this.#worker) return Promise.resolve(undefined);
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => settle(undefined), ANSWER_MS);
      const settle = (decision: Decision | undefined) => {
        clearTimeout(timer);
        this.#waiting.delete(id);
        resolve(decision);
      };
      this.#waiting.set(id, settle);
      process.send!({
        type: 'rowi:auth-failure',
        id,
        subject,
        quota: this.#quota,
        windowMs: this.#windowMs,
      } satisfies FailureMessage);
    });
  }

  async #askRedis(subject: string): Promise<Decision | undefined> {
    if (this.#redis === undefined) return undefined;
    const decision = await this.#redis.takeShared(`failed-auth:${subject}`, this.#quota, this.#windowMs);
    if (decision === undefined) return undefined;
    const forMs = blockedForMs(decision, this.#quota, this.#windowMs);
    if (forMs > 0) {
      this.#block(subject, forMs);
      this.#redis.announce('failed-auth', { subject, forMs });
    }
    return decision;
  }

  #block(subject: string, forMs: number): void {
    if (forMs <= 0) return;
    const until = Date.now() + forMs;
    const known = this.#blocked.get(subject);
    if (known !== undefined && known >= until) return;
    if (known === undefined && this.#blocked.size >= BLOCKED_KEYS)
      this.#blocked.delete(this.#blocked.keys().next().value as string);
    this.#blocked.set(subject, until);
  }

  #remember(digest: string, now = Date.now()): void {
    if (!this.#proven.has(digest) && this.#proven.size >= PROVEN_KEYS)
      this.#proven.delete(this.#proven.keys().next().value as string);
    this.#proven.set(digest, now + PROVEN_MS);
  }

  sweep(now = Date.now()): void {
    this.#own.sweep(now);
    for (const [subject, until] of this.#blocked) if (until <= now) this.#blocked.delete(subject);
    for (const [digest, until] of this.#proven) if (until <= now) this.#proven.delete(digest);
    for (const [credential, told] of this.#provenHere) if (now - told > PROVEN_MS) this.#provenHere.delete(credential);
  }

  close(): void {
    if (this.#worker) process.off('message', this.#onMessage);
    this.#unsubscribe?.();
    for (const settle of this.#waiting.values()) settle(undefined);
  }
}
