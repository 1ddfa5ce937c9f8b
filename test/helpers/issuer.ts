import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import {
  SignJWT,
  base64url,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';

/**
 * A local external identity provider for the bearer-token tests: its own key pairs, a JWKS
 * served over real HTTP on loopback (counting fetches), key rotation, and tokens with any
 * claims and headers. Nothing of rowi is used to build it.
 */
export type IssuerAlgorithm = 'RS256' | 'ES256';

interface KeyPair {
  kid: string;
  alg: IssuerAlgorithm;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

export interface SignOptions {
  alg?: IssuerAlgorithm;
  /** The kid put in the header; the signing key's own by default. */
  kid?: string;
  /** Extra protected header members (typ…). */
  header?: Record<string, unknown>;
}

export interface LocalIssuer {
  /** The issuer identifier (iss): http://127.0.0.1:PORT */
  url: string;
  jwksUrl: string;
  /** How many times the JWKS has been fetched (asked for, whatever the answer). */
  readonly jwksFetches: number;
  /**
   * How the JWKS URL answers from now on: with the keys (the default), with an error status, or
   * never (the request is held open until the issuer closes): a key server that is down.
   */
  answerJwksWith(answer: 'keys' | number | 'never'): void;
  /** The kid of the current signing key of an algorithm. */
  kidOf(alg?: IssuerAlgorithm): string;
  /** The kids the JWKS lists now. */
  publishedKids(): string[];
  /** The current public key of an algorithm as SPKI PEM: what an algorithm-confusion attacker holds. */
  publicKeyPem(alg?: IssuerAlgorithm): Promise<string>;
  /**
   * Makes a new signing key (new kid) for an algorithm; the JWKS lists it, and the previous
   * key as well unless `dropPrevious`.
   */
  rotate(alg?: IssuerAlgorithm, options?: { dropPrevious?: boolean }): Promise<string>;
  /**
   * A signed token. Claims default to iss = url, aud = the audience given at creation,
   * sub, iat = now, exp = now + 10 min; a claim set to undefined is left out.
   */
  sign(claims?: Record<string, unknown>, options?: SignOptions): Promise<string>;
  close(): Promise<void>;
}

export async function startIssuer(options: { audience: string; subject?: string }): Promise<LocalIssuer> {
  const current = new Map<IssuerAlgorithm, KeyPair>();
  let published: KeyPair[] = [];
  let fetches = 0;
  let jwksAnswer: 'keys' | number | 'never' = 'keys';

  async function makeKey(alg: IssuerAlgorithm): Promise<KeyPair> {
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
    const kid = randomUUID();
    return { kid, alg, privateKey, publicKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
  }
  for (const alg of ['RS256', 'ES256'] as const) {
    const key = await makeKey(alg);
    current.set(alg, key);
    published.push(key);
  }

  const server: Server = createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/jwks.json') {
      fetches++;
      if (jwksAnswer === 'never') return;
      if (typeof jwksAnswer === 'number') return void response.writeHead(jwksAnswer).end('down');
      response.writeHead(200, { 'content-type': 'application/jwk-set+json' });
      response.end(JSON.stringify({ keys: published.map((key) => key.publicJwk) }));
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const keyOf = (alg: IssuerAlgorithm = 'RS256') => current.get(alg)!;

  return {
    url,
    jwksUrl: `${url}/jwks.json`,
    get jwksFetches() {
      return fetches;
    },
    answerJwksWith(answer) {
      jwksAnswer = answer;
    },
    kidOf: (alg) => keyOf(alg).kid,
    publishedKids: () => published.map((key) => key.kid),
    publicKeyPem: (alg) => exportSPKI(keyOf(alg).publicKey),
    async rotate(alg = 'RS256', rotation = {}) {
      const previous = keyOf(alg);
      const next = await makeKey(alg);
      current.set(alg, next);
      published = [next, ...published.filter((key) => !(rotation.dropPrevious && key === previous))];
      return next.kid;
    },
    async sign(claims = {}, signing = {}) {
      const key = keyOf(signing.alg);
      const now = Math.floor(Date.now() / 1000);
      const payload: Record<string, unknown> = {
        iss: url,
        aud: options.audience,
        sub: options.subject ?? 'warehouse-robot',
        iat: now,
        exp: now + 600,
        ...claims,
      };
      for (const name of Object.keys(payload)) if (payload[name] === undefined) delete payload[name];
      return new SignJWT(payload as JWTPayload)
        .setProtectedHeader({ ...signing.header, alg: key.alg, kid: signing.kid ?? key.kid })
        .sign(key.privateKey);
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

const encodeJson = (value: unknown) => base64url.encode(JSON.stringify(value));

/** The header and payload of a compact JWS, decoded (no verification). */
export function partsOf(token: string): {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  signature: string;
} {
  const [header, payload, signature] = token.split('.');
  const decode = (part: string) =>
    JSON.parse(new TextDecoder().decode(base64url.decode(part))) as Record<string, unknown>;
  return { header: decode(header!), payload: decode(payload!), signature: signature ?? '' };
}

/** An unsecured JWT (RFC 7519 §6): alg none, empty signature. */
export function unsignedToken(payload: Record<string, unknown>, header: Record<string, unknown> = {}): string {
  return `${encodeJson({ ...header, alg: 'none' })}.${encodeJson(payload)}.`;
}

/** The same token with changed claims and the original signature: a tampered payload. */
export function tamperedToken(token: string, changes: Record<string, unknown>): string {
  const [header, payload, signature] = token.split('.');
  const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload!))) as Record<string, unknown>;
  return `${header!}.${encodeJson({ ...claims, ...changes })}.${signature!}`;
}

/**
 * Algorithm confusion: an HS256 token whose HMAC secret is the bytes of the issuer's PUBLIC
 * key, which a verifier that lets the token pick its algorithm would accept.
 */
export function hmacWithPublicKey(
  publicKey: string,
  payload: Record<string, unknown>,
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(payload as JWTPayload)
    .setProtectedHeader({ ...header, alg: 'HS256' })
    .sign(new TextEncoder().encode(publicKey));
}
