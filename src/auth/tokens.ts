import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import {
  SignJWT,
  decodeJwt,
  errors as joseErrors,
  jwtVerify,
  type CryptoKey,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
} from 'jose';
import type { Config } from '../config/config.js';
import type { Db } from '../db/database.js';
import type { Signals } from '../db/signals.js';
import { findRefusedText } from '../http/text.js';
import { listenOrigin, publicOrigin } from '../http/transport.js';
import { AppError } from '../errors.js';
import { IssuerKeys } from './issuer-keys.js';
import { ALGORITHM, SigningKeys } from './signing-keys.js';

/**
 * rowi's own access tokens (RFC 9068 JWTs from POST /oauth/token, signed with the keys of
 * signing-keys.ts) and bearer tokens of an external issuer.
 */
/** RFC 9068 §2.1: access tokens are typed, so an ID token cannot pass for one. */
const TOKEN_TYPE = 'at+jwt';
/**
 * Slack for clocks of other machines when checking nbf. Not for exp: a token stops working at its
 * exp, on every path alike (a request whose token was checked before, one checking it afresh, an
 * open event stream), as a key stops at its expires_at.
 */
const CLOCK_TOLERANCE_S = 5;

export interface VerifiedToken {
  kind: 'oauth' | 'external';
  subject: string;
  scopes: string[];
  /** Expiry, in seconds since the epoch. */
  expires: number;
  /** The rowi user the token acts for (docs/access.md "Acting for a user"); null: none. */
  userId: number | null;
}

/** The claim of rowi's own tokens that names the user a token acts for. */
export const USER_CLAIM = 'user_id';

/** A token refused, with the reason RFC 6750's error_description carries. */
export class TokenError extends Error {
  override name = 'TokenError';
}

export class TokenService {
  readonly #config: Config;
  #issuer = '';
  readonly #keys: SigningKeys;
  readonly #lifetime: number;
  readonly #external:
    { issuer: string; audience: string; algorithms: string[]; keys: JWTVerifyGetKey; userClaim: string } | undefined;

  /** `signals`: a rotation anywhere is heard at once (SigningKeys); `log`: where the external issuer's key server failing is said. */
  constructor(db: Db, config: Config, signals?: Signals, log?: FastifyBaseLogger) {
    this.#keys = new SigningKeys(db, signals);
    this.#lifetime = config.tokenLifetime;
    this.#config = config;
    this.useListenOrigin(listenOrigin(config));
    this.#external =
      config.jwtIssuer === ''
        ? undefined
        : {
            issuer: config.jwtIssuer,
            audience: config.jwtAudience,
            algorithms: config.jwtAlgorithms.split(','),
            userClaim: config.jwtUserClaim,
            keys: new IssuerKeys(config.jwtJwksUrl, log).getKey,
          };
  }

  /** The issuer (`iss`) of rowi's tokens and of its authorization server metadata. */
  get issuer(): string {
    return this.#issuer;
  }

  /**
   * The one way the issuer changes: once rowi listens, the origin of the address it is bound to
   * (process/startup.ts, and a worker told by its primary). Only then is the port known when
   * ROWI_PORT is 0, after the app was built; until then the issuer is that of the settings'
   * address. ROWI_PUBLIC_URL, when set, is the issuer throughout.
   */
  useListenOrigin(listened: string): void {
    this.#issuer = publicOrigin(this.#config, listened);
  }

  /** The audience of rowi's own tokens: the API's base URL. */
  get audience(): string {
    return `${this.issuer}/v1`;
  }

  get lifetime(): number {
    return this.#lifetime;
  }

  /** A token for the caller, with `scopes`; acting for user `userId` when it is not null. */
  async issue(caller: { id: number; name: string }, scopes: string[], userId: number | null = null): Promise<string> {
    const key = await this.#keys.current();
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      scope: scopes.join(' '),
      client_id: caller.name,
      ...(userId === null ? {} : { [USER_CLAIM]: userId }),
    })
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
        return {
          kind: 'oauth',
          subject: String(payload.sub),
          scopes: scopeClaim(payload),
          expires: unexpired(payload.exp!),
          userId: userClaim(payload, USER_CLAIM),
        };
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
        return {
          kind: 'external',
          subject: storableSubject(payload),
          scopes: scopeClaim(payload),
          expires: unexpired(payload.exp!),
          userId: external.userClaim === '' ? null : userClaim(payload, external.userClaim),
        };
      }
    } catch (error) {
      // The issuer's keys could not be had: the token was not checked, so it is not refused (503).
      if (error instanceof AppError) throw error;
      throw new TokenError(describeRefusal(error));
    }
    throw new TokenError(`Tokens of issuer ${JSON.stringify(String(claims.iss ?? '(none)'))} are not accepted here.`);
  }

  /** The public keys tokens may still be verified with: JWKS (RFC 7517) for /.well-known/jwks.json. */
  async publishedKeys(): Promise<JWK[]> {
    return this.#keys.published(new Date(Date.now() - (this.#lifetime + CLOCK_TOLERANCE_S) * 1000).toISOString());
  }

  /** Retires the signing key in use and makes a new one; returns the new kid. */
  rotate(): Promise<string> {
    return this.#keys.rotate();
  }

  close(): void {
    this.#keys.close();
  }

  async #verificationKey(kid: string | undefined): Promise<CryptoKey> {
    if (kid === undefined) throw new TokenError('The token names no signing key (kid).');
    const key = await this.#keys.find(kid);
    if (key === undefined) throw new TokenError('The token was signed with a key rowi does not know (unknown kid).');
    return key.publicKey;
  }
}

function scopeClaim(payload: JWTPayload): string[] {
  // RFC 9068 §2.2.3.1 / RFC 8693 §4.2: a space-separated string; some issuers send an array.
  const scope = payload.scope ?? payload.scp;
  if (typeof scope === 'string') return scope.split(' ').filter((item) => item !== '');
  if (Array.isArray(scope)) return scope.filter((item): item is string => typeof item === 'string');
  return [];
}

/**
 * The user a token acts for, from `claim`: a user id, as a JSON number or a decimal string (a
 * subject claim is a string); absent: none. Anything else refuses the token, rather than let it
 * act for nobody and so see what its scopes allow.
 */
function userClaim(payload: JWTPayload, claim: string): number | null {
  const value = payload[claim];
  if (value === undefined) return null;
  const id = typeof value === 'string' && /^[1-9][0-9]{0,15}$/.test(value) ? Number(value) : value;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1)
    throw new TokenError(`The token's ${claim} claim is not a user id.`);
  return id;
}

/**
 * An external token's subject, which rowi records as who called (the audit trail, operations) and
 * keys its idempotency records by: text rowi refuses anywhere (a NUL, a lone surrogate) refuses
 * the token, as it would a body holding it.
 */
function storableSubject(payload: JWTPayload): string {
  const subject = String(payload.sub);
  const refused = findRefusedText(subject);
  if (refused !== undefined) throw new TokenError(`The token's sub claim ${refused.detail}.`);
  return subject;
}

/** The expiry of a token verified with the clock tolerance, if it has not passed. */
function unexpired(exp: number): number {
  if (exp * 1000 <= Date.now()) throw new TokenError('The token has expired.');
  return exp;
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
  if (error instanceof joseErrors.JOSEAlgNotAllowed)
    return 'The token is signed with an algorithm that is not accepted.';
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return "The token's signature does not verify.";
  if (error instanceof joseErrors.JWKSNoMatchingKey)
    return 'The token was signed with a key the issuer does not publish (unknown kid).';
  if (error instanceof joseErrors.JWKSTimeout || error instanceof joseErrors.JOSEError)
    return `The token could not be verified (${error.code}).`;
  return 'The token could not be verified.';
}
