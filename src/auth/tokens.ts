import { randomUUID } from 'node:crypto';
import {
  SignJWT,
  createRemoteJWKSet,
  decodeJwt,
  errors as joseErrors,
  exportJWK,
  generateKeyPair,
  importJWK,
  jwtVerify,
  type CryptoKey,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
} from 'jose';
import type { Config } from '../config.js';
import type { Db, Executor } from '../db/database.js';
import { EVERYTHING, type Signals } from '../db/signals.js';
import { nowTimestamp } from '../db/clock.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { findSigningKeys, hasActiveSigningKey, insertSigningKey, retireSigningKeys, takeSigningKeyTurn } from './signing-keys.repository.js';

/**
 * rowi's own access tokens (RFC 9068 JWTs from POST /oauth/token) and bearer tokens of an
 * external issuer. Signing keys live in the database so every instance signs and verifies with
 * the same ones; a retired key stays published until the last token it signed has expired.
 */
const ALGORITHM = 'ES256';
/** RFC 9068 §2.1: access tokens are typed, so an ID token cannot pass for one. */
const TOKEN_TYPE = 'at+jwt';
/** Slack for clocks of other machines when checking exp and nbf. */
const CLOCK_TOLERANCE_S = 5;
/** The signal that the signing keys changed somewhere. */
const SIGNING_KEYS_TOPIC = 'signing-keys';
/** An unknown kid reloads the keys from the database at most this often. */
const RELOAD_INTERVAL_MS = 1000;

export interface VerifiedToken {
  kind: 'oauth' | 'external';
  subject: string;
  scopes: string[];
  /** Expiry, in seconds since the epoch. */
  expires: number;
}

/** A token refused, with the reason RFC 6750's error_description carries. */
export class TokenError extends Error {
  override name = 'TokenError';
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
  createdAt: string;
  retiredAt: string | null;
}

export class TokenService {
  /** The issuer (`iss`) of rowi's tokens and of its authorization server metadata. */
  issuer: string;
  readonly #db: Db;
  readonly #lifetime: number;
  readonly #external: { issuer: string; audience: string; algorithms: string[]; keys: JWTVerifyGetKey } | undefined;
  #keys = new Map<string, SigningKey>();
  #loadedAt = 0;
  readonly #signals: Signals | undefined;
  readonly #unsubscribe: () => void;

  /**
   * With `signals`, a rotation anywhere (another instance, `rowi signing-keys rotate` on
   * PostgreSQL) makes this instance reread the keys at its next use instead of within a second.
   */
  constructor(db: Db, config: Config, issuer: string, signals?: Signals) {
    this.#db = db;
    this.#signals = signals;
    this.#unsubscribe =
      signals?.subscribe((topic) => {
        if (topic === SIGNING_KEYS_TOPIC || topic === EVERYTHING) this.#loadedAt = 0;
      }) ?? (() => {});
    this.#lifetime = config.tokenLifetime;
    this.issuer = issuer;
    this.#external =
      config.jwtIssuer === ''
        ? undefined
        : {
            issuer: config.jwtIssuer,
            audience: config.jwtAudience,
            algorithms: config.jwtAlgorithms.split(','),
            // jose caches the key set, refetches it on an unknown kid, and waits `cooldownDuration`
            // between fetches, so a flood of made-up kids cannot hammer the issuer.
            keys: createRemoteJWKSet(new URL(config.jwtJwksUrl), { cooldownDuration: 30_000, cacheMaxAge: 600_000, timeoutDuration: 5000 }),
          };
  }

  /** The audience of rowi's own tokens: the API's base URL. */
  get audience(): string {
    return `${this.issuer}/v1`;
  }

  get lifetime(): number {
    return this.#lifetime;
  }

  async issue(caller: { id: number; name: string }, scopes: string[]): Promise<string> {
    const key = await this.#signingKey();
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope: scopes.join(' '), client_id: caller.name })
      .setProtectedHeader({ alg: ALGORITHM, kid: key.kid, typ: TOKEN_TYPE })
      .setIssuer(this.issuer)
      .setAudience(this.audience)
      .setSubject(String(caller.id))
      .setIssuedAt(now)
      .setExpirationTime(now + this.#lifetime)
      .setJti(randomUUID())
      .sign(key.privateKey);
  }

  /** Verifies a bearer token from rowi or from the configured external issuer; throws TokenError. */
  async verify(token: string): Promise<VerifiedToken> {
    let claims: JWTPayload;
    try {
      claims = decodeJwt(token);
    } catch {
      throw new TokenError('The bearer token is not a JWT.');
    }
    try {
      if (claims.iss === this.issuer) {
        const { payload } = await jwtVerify(token, (header) => this.#verificationKey(header.kid), {
          issuer: this.issuer,
          audience: this.audience,
          algorithms: [ALGORITHM],
          typ: TOKEN_TYPE,
          clockTolerance: CLOCK_TOLERANCE_S,
          requiredClaims: ['exp', 'sub'],
        });
        return { kind: 'oauth', subject: String(payload.sub), scopes: scopeClaim(payload), expires: payload.exp! };
      }
      const external = this.#external;
      if (external && claims.iss === external.issuer) {
        const { payload } = await jwtVerify(token, external.keys, {
          issuer: external.issuer,
          audience: external.audience,
          algorithms: external.algorithms,
          clockTolerance: CLOCK_TOLERANCE_S,
          requiredClaims: ['exp', 'sub'],
        });
        return { kind: 'external', subject: String(payload.sub), scopes: scopeClaim(payload), expires: payload.exp! };
      }
    } catch (error) {
      throw new TokenError(describeRefusal(error));
    }
    throw new TokenError(`Tokens of issuer ${JSON.stringify(String(claims.iss ?? '(none)'))} are not accepted here.`);
  }

  /** The public keys tokens may still be verified with: JWKS (RFC 7517) for /.well-known/jwks.json. */
  async publishedKeys(): Promise<JWK[]> {
    await this.#load();
    const oldestValid = new Date(Date.now() - (this.#lifetime + CLOCK_TOLERANCE_S) * 1000).toISOString();
    return [...this.#keys.values()]
      .filter((key) => key.retiredAt === null || key.retiredAt > oldestValid)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
      .map((key) => key.publicJwk);
  }

  /** Retires the signing key in use and makes a new one; returns the new kid. */
  async rotate(): Promise<string> {
    const now = nowTimestamp();
    await retireSigningKeys(this.#db, now);
    const kid = await this.#createKey();
    await this.#load(true);
    await this.#signals?.publish(SIGNING_KEYS_TOPIC).catch(() => {}); // the others still reread within RELOAD_INTERVAL_MS
    return kid;
  }

  close(): void {
    this.#unsubscribe();
  }

  async #signingKey(): Promise<SigningKey> {
    await this.#load();
    let current = this.#newestActive();
    if (current === undefined) {
      await this.#createKey();
      await this.#load(true);
      current = this.#newestActive();
    }
    if (current === undefined) throw new Error('no signing key could be created');
    return current;
  }

  #newestActive(): SigningKey | undefined {
    return [...this.#keys.values()].filter((key) => key.retiredAt === null).sort((a, b) => b.createdAt.localeCompare(a.createdAt))[0];
  }

  async #verificationKey(kid: string | undefined): Promise<CryptoKey> {
    if (kid === undefined) throw new TokenError('The token names no signing key (kid).');
    let key = this.#keys.get(kid);
    if (key === undefined && Date.now() - this.#loadedAt >= RELOAD_INTERVAL_MS) {
      // Another instance may have rotated the key since this one loaded them.
      await this.#load(true);
      key = this.#keys.get(kid);
    }
    if (key === undefined) throw new TokenError('The token was signed with a key rowi does not know (unknown kid).');
    return key.publicKey;
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

  async #createKey(): Promise<string> {
    return createSigningKey(this.#db);
  }
}

/** A new signing key, stored; returns its kid. */
async function createSigningKey(db: Executor): Promise<string> {
  const { privateKey, publicKey } = await generateKeyPair(ALGORITHM, { extractable: true });
  const kid = randomUUID();
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: ALGORITHM, use: 'sig' };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALGORITHM };
  await insertSigningKey(db, { kid, algorithm: ALGORITHM, private_jwk: JSON.stringify(privateJwk), public_jwk: JSON.stringify(publicJwk), created_at: nowTimestamp(), retired_at: null });
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

function scopeClaim(payload: JWTPayload): string[] {
  // RFC 9068 §2.2.3.1 / RFC 8693 §4.2: a space-separated string; some issuers send an array.
  const scope = payload.scope ?? payload.scp;
  if (typeof scope === 'string') return scope.split(' ').filter((item) => item !== '');
  if (Array.isArray(scope)) return scope.filter((item): item is string => typeof item === 'string');
  return [];
}

function describeRefusal(error: unknown): string {
  if (error instanceof TokenError) return error.message;
  if (error instanceof joseErrors.JWTExpired) return 'The token has expired.';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'nbf':
        return 'The token is not valid yet (nbf is in the future).';
      case 'aud':
        return 'The token is meant for another audience.';
      case 'iss':
        return 'The token comes from an issuer that is not accepted.';
      case 'typ':
        return 'The token is not an access token (typ must be at+jwt).';
      default:
        return `The token's ${error.claim} claim is invalid.`;
    }
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'The token is signed with an algorithm that is not accepted.';
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'The token\'s signature does not verify.';
  if (error instanceof joseErrors.JWKSNoMatchingKey) return 'The token was signed with a key the issuer does not publish (unknown kid).';
  if (error instanceof joseErrors.JWKSTimeout || error instanceof joseErrors.JOSEError) return `The token could not be verified (${error.code}).`;
  return 'The token could not be verified.';
}
