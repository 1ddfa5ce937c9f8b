import { EventEmitter } from 'node:events';
import type { FastifyBaseLogger } from 'fastify';
import type { Db, Role } from '../db/database.js';
import { isCorruption } from '../db/driver-errors.js';
import { EVERYTHING, type Signals } from '../db/signals.js';
import { AuthenticationError } from '../errors.js';
import { findCallerById, findKeyForAuthentication, touchApiKeys } from './callers.repository.js';
import { hashApiKey, prefixOf, sameHash } from './api-keys.js';
import {
  ACT_FOR_USERS,
  isGrantable,
  isScope,
  mayUseWhileActing,
  ownRecordsOf,
  parseScopeList,
  scopesOf,
} from './policy.js';
import { TokenError, type TokenService, type VerifiedToken } from './tokens.js';
import { challenge } from './challenge.js';

/** Who is calling, once credentials have been checked. */
export interface Principal {
  credential: 'api_key' | 'oauth' | 'external';
  /** The caller's id; null for the subject of an external issuer's token. */
  callerId: number | null;
  /** The caller's name, or the external token's subject. */
  name: string;
  scopes: ReadonlySet<string>;
  /** The resources it sees only its own records of (docs/access.md); empty for an external issuer's subject. */
  ownRecords: ReadonlySet<string>;
  /**
   * The rowi user the request acts for (a token asked for with user_id, or an external token's
   * user claim): it then sees only that user's record and orders (docs/access.md); null: none.
   */
  userId: number | null;
  /** The caller's role; null for the subject of an external issuer's token. */
  role: Role | null;
  /** The caller's own requests per minute; null: its role's default. */
  rateLimit: number | null;
  /** When the key or token stops working (milliseconds since the epoch); Infinity: never. */
  expiresAt: number;
}

/**
 * How long a checked key or caller is believed without asking the database again. A revoked key
 * or a changed role takes effect on every instance within this time (the contract says 1 s);
 * on the instance that made the change, at once.
 */
export const FRESH_MS = 500;
/** last_used_at is written for all keys used at most this often: never a write per request. */
const LAST_USED_FLUSH_MS = 5000;
const CACHE_LIMIT = 10_000;
const NOTHING_OWN: ReadonlySet<string> = new Set();
/** The signal that callers or keys changed somewhere. */
const CREDENTIALS_TOPIC = 'credentials';

interface Checked<T> {
  value: T;
  checkedAt: number;
}

/** What a token's principal is rebuilt from: its caller as last read. */
interface CachedCaller {
  name: string;
  scopes: ReadonlySet<string>;
  ownRecords: ReadonlySet<string>;
  role: Role;
  rateLimit: number | null;
}

/** A token whose signature and claims were checked, and the principal it last resolved to. */
interface TokenEntry extends VerifiedToken {
  principal?: Checked<Principal> & { generation: number };
}

/**
 * Turns credentials into a Principal, or throws a 401 problem. Answers from memory on the hot
 * path (a map look-up for a key or a token already checked) and goes
 * to the database only when an entry is older than FRESH_MS. Emits `change` whenever callers or
 * keys may have changed (here, or elsewhere as a signal says): what holds a credential for longer
 * than a request (an event stream) checks it again then.
 */
export class Authenticator extends EventEmitter<{ change: [] }> {
  readonly tokens: TokenService;
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  /**
   * Keys checked against the store, by the key itself: a hit costs a map look-up and no hash.
   * (Keys, like tokens, are therefore in this process's memory while in use; only their hash
   * is ever stored. A miss hashes the key and compares the hashes in constant time.)
   */
  readonly #keys = new Map<string, Checked<Principal & { keyId: number }>>();
  /** Look-ups in flight, so that the requests that find a key stale at once share one query. */
  readonly #loadingKeys = new Map<string, Promise<Principal>>();
  readonly #callers = new Map<number, Checked<CachedCaller | undefined>>();
  readonly #verifiedTokens = new Map<string, TokenEntry>();
  /** Incremented by forget(): a principal built before it is built again. */
  #generation = 0;
  readonly #lastUsed = new Map<number, number>();
  readonly #timer: NodeJS.Timeout;

  readonly #signals: Signals;
  readonly #unsubscribe: () => void;

  constructor(db: Db, tokens: TokenService, log: FastifyBaseLogger, signals: Signals) {
    super();
    this.#db = db;
    this.tokens = tokens;
    this.#log = log;
    this.#timer = setInterval(() => void this.flushLastUsed(), LAST_USED_FLUSH_MS);
    this.#timer.unref();
    this.#signals = signals;
    this.#unsubscribe = signals.subscribe((topic) => {
      if (topic === CREDENTIALS_TOPIC || topic === EVERYTHING) this.#forgetHere();
    });
  }

  /**
   * After a caller or key changed (and its transaction committed): forget everything believed,
   * here at once and on the other instances as soon as they hear it (well within FRESH_MS).
   */
  async forget(): Promise<void> {
    this.#forgetHere();
    try {
      await this.#signals.publish(CREDENTIALS_TOPIC);
    } catch (error) {
      // The change is stored; other instances still stop believing within FRESH_MS.
      this.#db.outage.failed(
        this.#log,
        'credential-signals',
        error,
        'could not tell other instances that credentials changed',
      );
    }
  }

  #forgetHere(): void {
    this.#generation++;
    this.#keys.clear();
    this.#loadingKeys.clear();
    this.#callers.clear();
    this.emit('change');
  }

  async close(): Promise<void> {
    this.#unsubscribe();
    this.tokens.close();
    clearInterval(this.#timer);
    await this.flushLastUsed();
  }

  authenticateKey(key: string): Principal | Promise<Principal> {
    const now = Date.now();
    const cached = this.#keys.get(key);
    // A key that expires is refused from that instant, not FRESH_MS later.
    if (cached !== undefined && now - cached.checkedAt < FRESH_MS && now < cached.value.expiresAt) {
      this.#lastUsed.set(cached.value.keyId, now);
      return cached.value;
    }
    const prefix = prefixOf(key);
    if (prefix === undefined) throw invalid('The API key is not one rowi issued (rowi_…).');
    let loading = this.#loadingKeys.get(key);
    if (loading === undefined) {
      const started: Promise<Principal> = this.#loadKey(key, prefix, now).finally(() => {
        if (this.#loadingKeys.get(key) === started) this.#loadingKeys.delete(key);
      });
      this.#loadingKeys.set(key, (loading = started));
    }
    return loading;
  }

  authenticateToken(token: string): Principal | Promise<Principal> {
    const verified = this.#verifiedTokens.get(token);
    if (verified === undefined) return this.#verifyToken(token);
    if (verified.expires * 1000 <= Date.now()) {
      this.#verifiedTokens.delete(token);
      throw invalid('The token has expired.');
    }
    // The principal a token resolved to is believed as long as a checked key is.
    const built = verified.principal;
    const now = Date.now();
    if (built !== undefined && built.generation === this.#generation && now - built.checkedAt < FRESH_MS)
      return built.value;
    return this.#principalOfToken(verified);
  }

  async flushLastUsed(): Promise<void> {
    if (this.#lastUsed.size === 0) return;
    const batch = new Map([...this.#lastUsed].map(([keyId, at]) => [keyId, new Date(at).toISOString()]));
    this.#lastUsed.clear();
    try {
      await touchApiKeys(this.#db, batch);
    } catch (error) {
      if (!isCorruption(error))
        this.#db.outage.failed(this.#log, 'api-keys', error, 'could not record when API keys were last used');
    }
  }

  async #loadKey(key: string, prefix: string, now: number): Promise<Principal> {
    this.#keys.delete(key);
    const generation = this.#generation;
    const row = await findKeyForAuthentication(this.#db, prefix);
    if (row === undefined || !sameHash(row.secret_hash, hashApiKey(key))) throw invalid('The API key is not known.');
    if (row.revoked_at !== null) throw invalid('The API key has been revoked.');
    if (row.expires_at !== null && row.expires_at <= new Date(now).toISOString())
      throw invalid('The API key has expired.');
    const principal = {
      credential: 'api_key' as const,
      callerId: row.caller_id,
      keyId: row.key_id,
      expiresAt: row.expires_at === null ? Infinity : Date.parse(row.expires_at),
      name: row.name,
      scopes: scopesOf(row.role as Role, parseScopeList(row.extra_scopes), parseScopeList(row.removed_scopes)),
      ownRecords: ownRecordsOf(row.own_records),
      userId: null,
      role: row.role as Role,
      rateLimit: row.rate_limit,
    };
    // A change made on this instance while the query ran (forget()) may have made it stale.
    if (generation === this.#generation) remember(this.#keys, key, { value: principal, checkedAt: now });
    this.#lastUsed.set(row.key_id, now);
    return principal;
  }

  async #verifyToken(token: string): Promise<Principal> {
    let verified;
    try {
      verified = await this.tokens.verify(token);
    } catch (error) {
      if (error instanceof TokenError) throw invalid(error.message);
      throw error;
    }
    remember(this.#verifiedTokens, token, verified);
    return this.#principalOfToken(verified);
  }

  #principalOfToken(token: TokenEntry): Principal | Promise<Principal> {
    const now = Date.now();
    const generation = this.#generation;
    const keep = (value: Principal): Principal => {
      token.principal = { value, checkedAt: now, generation };
      return value;
    };
    // External subjects are not callers of this service: they get the scopes their issuer gave,
    // never caller management.
    if (token.kind === 'external') {
      // Acting for a user, it keeps only what acting allows (as a token rowi issues does).
      const scopes = new Set(
        token.scopes.filter(
          (scope) => isScope(scope) && isGrantable(scope) && (token.userId === null || mayUseWhileActing(scope)),
        ),
      );
      return keep({
        credential: 'external',
        callerId: null,
        name: token.subject,
        scopes,
        ownRecords: NOTHING_OWN,
        userId: token.userId,
        role: null,
        rateLimit: null,
        expiresAt: token.expires * 1000,
      });
    }
    const callerId = Number(token.subject);
    const cached = this.#callers.get(callerId);
    const principalOf = (caller: CachedCaller | undefined): Principal => {
      if (caller === undefined) throw invalid("The token's caller no longer exists.");
      // A token that acts for a user works only while its caller may still act for users.
      if (token.userId !== null && !caller.scopes.has(ACT_FOR_USERS))
        throw invalid(`The token's caller may no longer act for users (${ACT_FOR_USERS}).`);
      // A token carries the scopes granted when it was issued; a caller whose role has since
      // shrunk keeps only what it still holds; acting for a user, only what acting allows.
      const scopes = new Set(
        token.scopes.filter((scope) => caller.scopes.has(scope) && (token.userId === null || mayUseWhileActing(scope))),
      );
      return keep({
        credential: 'oauth',
        callerId,
        name: caller.name,
        scopes,
        ownRecords: caller.ownRecords,
        userId: token.userId,
        role: caller.role,
        rateLimit: caller.rateLimit,
        expiresAt: token.expires * 1000,
      });
    };
    if (cached !== undefined && now - cached.checkedAt < FRESH_MS) return principalOf(cached.value);
    return findCallerById(this.#db, callerId).then((row) => {
      const caller = row && {
        name: row.name,
        scopes: scopesOf(row.role, parseScopeList(row.extra_scopes), parseScopeList(row.removed_scopes)),
        ownRecords: ownRecordsOf(row.own_records),
        role: row.role,
        rateLimit: row.rate_limit,
      };
      remember(this.#callers, callerId, { value: caller, checkedAt: now });
      return principalOf(caller);
    });
  }
}

function invalid(detail: string): AuthenticationError {
  return new AuthenticationError('invalid-credentials', detail, challenge('invalid_token', detail));
}

/** A bounded map: the oldest entry goes when it is full (Map keeps insertion order). */
function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  if (map.size >= CACHE_LIMIT) map.delete(map.keys().next().value as K);
  map.set(key, value);
}
