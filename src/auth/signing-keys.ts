import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Db, Executor } from '../db/database.js';
import { EVERYTHING, type Signals } from '../db/signals.js';
import { nowTimestamp } from '../db/clock.js';
import { unitOfWork } from '../db/unit-of-work.js';
import {
  findSigningKeys,
  hasActiveSigningKey,
  insertSigningKey,
  retireSigningKeys,
  takeSigningKeyTurn,
} from './signing-keys.repository.js';

/**
 * The keys rowi signs its access tokens with (tokens.ts). They live in the database so every
 * instance signs and verifies with the same ones; a retired key stays published until the last
 * token it signed has expired. Each instance keeps them in memory and rereads them at most once
 * a second when asked, at once when a rotation is signalled.
 */
export const ALGORITHM = 'ES256';
/** The signal that the signing keys changed somewhere. */
const SIGNING_KEYS_TOPIC = 'signing-keys';
/** An unknown kid reloads the keys from the database at most this often. */
const RELOAD_INTERVAL_MS = 1000;

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
  createdAt: string;
  retiredAt: string | null;
}

export class SigningKeys {
  readonly #db: Db;
  #keys = new Map<string, SigningKey>();
  #loadedAt = 0;
  readonly #signals: Signals | undefined;
  readonly #unsubscribe: () => void;

  /**
   * With `signals`, a rotation anywhere (another instance, `rowi signing-keys rotate` on
   * PostgreSQL) makes this instance reread the keys at its next use instead of within a second.
   */
  constructor(db: Db, signals?: Signals) {
    this.#db = db;
    this.#signals = signals;
    this.#unsubscribe =
      signals?.subscribe((topic) => {
        if (topic === SIGNING_KEYS_TOPIC || topic === EVERYTHING) this.#loadedAt = 0;
      }) ?? (() => {});
  }

  /** The newest active key, made first when there is none. */
  async current(): Promise<SigningKey> {
    await this.#load();
    let current = this.#newestActive();
    if (current === undefined) {
      await createSigningKey(this.#db);
      await this.#load(true);
      current = this.#newestActive();
    }
    if (current === undefined) throw new Error('no signing key could be created');
    return current;
  }

  /** The key of `kid`, reloaded once a second at most when unknown (another instance may have rotated); undefined when none. */
  async find(kid: string): Promise<SigningKey | undefined> {
    const key = this.#keys.get(kid);
    if (key !== undefined || Date.now() - this.#loadedAt < RELOAD_INTERVAL_MS) return key;
    await this.#load(true);
    return this.#keys.get(kid);
  }

  /** The public keys that verify tokens issued since `oldestValid` (ISO time), newest first. */
  async published(oldestValid: string): Promise<JWK[]> {
    await this.#load();
    return [...this.#keys.values()]
      .filter((key) => key.retiredAt === null || key.retiredAt > oldestValid)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
      .map((key) => key.publicJwk);
  }

  /** Retires the key in use and makes a new one, in one unit of work; returns the new kid. */
  async rotate(): Promise<string> {
    const kid = await unitOfWork(this.#db, async (trx) => {
      await retireSigningKeys(trx, nowTimestamp());
      return createSigningKey(trx);
    });
    await this.#load(true);
    await this.#signals?.publish(SIGNING_KEYS_TOPIC).catch(() => {}); // the others still reread within RELOAD_INTERVAL_MS
    return kid;
  }

  close(): void {
    this.#unsubscribe();
  }

  #newestActive(): SigningKey | undefined {
    return [...this.#keys.values()]
      .filter((key) => key.retiredAt === null)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))[0];
  }

  async #load(force = false): Promise<void> {
    // Signing and publishing reread the keys at most once a second, so a rotation by the CLI or
    // another instance is signed with and published within a second, not a minute.
    if (!force && this.#loadedAt !== 0 && Date.now() - this.#loadedAt < RELOAD_INTERVAL_MS) return;
    const rows = await findSigningKeys(this.#db);
    const keys = new Map<string, SigningKey>();
    for (const row of rows) {
      const known = this.#keys.get(row.kid);
      keys.set(
        row.kid,
        known
          ? { ...known, retiredAt: row.retired_at }
          : {
              kid: row.kid,
              privateKey: (await importJWK(JSON.parse(row.private_jwk) as JWK, ALGORITHM)) as CryptoKey,
              publicKey: (await importJWK(JSON.parse(row.public_jwk) as JWK, ALGORITHM)) as CryptoKey,
              publicJwk: JSON.parse(row.public_jwk) as JWK,
              createdAt: row.created_at,
              retiredAt: row.retired_at,
            },
      );
    }
    this.#keys = keys;
    this.#loadedAt = Date.now();
  }
}

/** A new signing key, stored; returns its kid. */
async function createSigningKey(db: Executor): Promise<string> {
  const { privateKey, publicKey } = await generateKeyPair(ALGORITHM, { extractable: true });
  const kid = randomUUID();
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: ALGORITHM, use: 'sig' };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALGORITHM };
  await insertSigningKey(db, {
    kid,
    algorithm: ALGORITHM,
    private_jwk: JSON.stringify(privateJwk),
    public_jwk: JSON.stringify(publicJwk),
    created_at: nowTimestamp(),
    retired_at: null,
  });
  return kid;
}

/**
 * Makes sure a key signs tokens before the first token is asked for, so /.well-known/jwks.json
 * publishes it from the start: a resource server that fetches the key set once, when it starts,
 * must find the key its tokens will be signed with (an empty set would make it refuse them all).
 * Run when the database is migrated. Instances that start at once take turns (an advisory lock
 * on PostgreSQL; SQLite's write lock), so exactly one key is made.
 */
export async function ensureSigningKey(db: Db): Promise<void> {
  await unitOfWork(db, async (trx) => {
    await takeSigningKeyTurn(trx);
    if (!(await hasActiveSigningKey(trx))) await createSigningKey(trx);
  });
}
