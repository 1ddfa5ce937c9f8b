import type { FastifyBaseLogger } from 'fastify';
import {
  createLocalJWKSet,
  errors as joseErrors,
  type CryptoKey,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  type JWTVerifyGetKey,
} from 'jose';
import { AppError } from '../errors.js';

/**
 * The key set of the external issuer (ROWI_JWT_JWKS_URL), fetched and held by this process
 * (docs/security.md "Tokens from your identity provider"). Its key server being down is not a
 * reason to refuse a token: a token signed with a key rowi holds goes on verifying with the set
 * fetched earlier, however old; one rowi cannot check (no set yet, or a kid the set lacks and the
 * server does not answer) is answered 503 issuer-unavailable, which is no failed authentication.
 * The server is asked at most once every REFETCH_MS, whether the last fetch worked or not, by
 * one fetch that every request waiting for it shares, for at most FETCH_TIMEOUT_MS.
 */

/** After a fetch, worked or failed, the next waits this long: a flood of made-up kids, or a server that is down, is not hammered. */
const REFETCH_MS = 30_000;
/** A set older than this is fetched again, in the background: the one held keeps verifying meanwhile. */
const MAX_AGE_MS = 600_000;
/** One fetch of the set waits at most this long; the requests that need it wait with it. */
export const FETCH_TIMEOUT_MS = 3000;
/** A key set larger than this is no key set. */
const MAX_SET_BYTES = 1_048_576;

type KeyResolver = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;

export class IssuerKeys {
  readonly #url: string;
  readonly #log: FastifyBaseLogger | undefined;
  #resolve: KeyResolver | undefined;
  #fetchedAt = -Infinity;
  #attemptedAt = -Infinity;
  #fetching: Promise<void> | undefined;
  /** Why the last fetch failed; undefined while the last one worked. */
  #failure: string | undefined;

  constructor(url: string, log?: FastifyBaseLogger) {
    this.#url = url;
    this.#log = log;
  }

  /** jose's key resolver (jwtVerify's second argument). */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    if (this.#resolve === undefined) await this.#refresh();
    else if (Date.now() - this.#fetchedAt > MAX_AGE_MS) this.#refresh().catch(() => {});
    try {
      return await this.#resolve!(header, token);
    } catch (error) {
      // A kid the set lacks: the issuer may have rotated since it was fetched. Unless it was
      // fetched a moment ago (or is being fetched: then wait for that), ask again; a server that
      // does not answer leaves the token unchecked.
      if (!(error instanceof joseErrors.JWKSNoMatchingKey)) throw error;
      const justFetched = this.#failure === undefined && Date.now() - this.#attemptedAt < REFETCH_MS;
      if (justFetched && this.#fetching === undefined) throw error;
      await this.#refresh();
      return this.#resolve!(header, token);
    }
  };

  /** Fetches the set, unless a fetch is under way (shared) or one was tried within REFETCH_MS. */
  #refresh(): Promise<void> {
    if (this.#fetching !== undefined) return this.#fetching;
    const waitMs = this.#attemptedAt + REFETCH_MS - Date.now();
    if (waitMs > 0) return this.#failure === undefined ? Promise.resolve() : Promise.reject(this.#unavailable(waitMs));
    this.#attemptedAt = Date.now();
    const fetching = fetchKeySet(this.#url).then(
      (set) => {
        this.#resolve = set;
        this.#fetchedAt = Date.now();
        if (this.#failure !== undefined)
          this.#log?.info({ jwks_url: this.#url }, "the external issuer's key set is fetched again");
        this.#failure = undefined;
      },
      (error: unknown) => {
        const reason = reasonOf(error);
        // Said once when fetching starts to fail, and again only when the reason changes.
        if (this.#failure !== reason)
          this.#log?.warn(
            { jwks_url: this.#url, reason },
            `could not fetch the external issuer's key set: ${reason}; ${this.#resolve === undefined ? 'its tokens are answered 503 until it answers' : 'tokens signed with keys fetched earlier still verify'} (asked again at most every ${REFETCH_MS / 1000} s)`,
          );
        this.#failure = reason;
        throw this.#unavailable(REFETCH_MS);
      },
    );
    this.#fetching = fetching.finally(() => (this.#fetching = undefined));
    return this.#fetching;
  }

  #unavailable(waitMs: number): AppError {
    return new AppError(
      'issuer-unavailable',
      `The token could not be checked: the key server of its issuer did not give its keys (${this.#failure}). This is not a refusal of the token; retry after Retry-After seconds.`,
      { headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } },
    );
  }
}

/** The key set at `url`: a 200 answer of at most MAX_SET_BYTES of JSON that is a JWK Set (RFC 7517 §5), within FETCH_TIMEOUT_MS. */
async function fetchKeySet(url: string): Promise<KeyResolver> {
  const signal = AbortSignal.timeout(FETCH_TIMEOUT_MS);
  const response = await fetch(url, {
    signal,
    redirect: 'manual',
    headers: { accept: 'application/jwk-set+json, application/json' },
  });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`it answered ${response.status}`);
  }
  const text = await readText(response);
  let set: unknown;
  try {
    set = JSON.parse(text);
  } catch {
    throw new Error('its answer is not JSON');
  }
  try {
    return createLocalJWKSet(set as JSONWebKeySet);
  } catch {
    throw new Error('its answer is not a JWK Set');
  }
}

async function readText(response: Response): Promise<string> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of response.body ?? []) {
    length += (chunk as Uint8Array).length;
    if (length > MAX_SET_BYTES) throw new Error(`its answer is larger than ${MAX_SET_BYTES} bytes`);
    chunks.push(chunk as Uint8Array);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return `no answer within ${FETCH_TIMEOUT_MS} ms`;
  const code = (error.cause as { code?: unknown } | undefined)?.code;
  if (error.message === 'fetch failed') return typeof code === 'string' ? `unreachable (${code})` : 'unreachable';
  return error.message;
}
