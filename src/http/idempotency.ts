import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import { nowTimestamp } from '../db/clock.js';
import type { Db, Trx } from '../db/database.js';
import type { RetainedTable } from '../db/retention.js';
import { isUniqueViolation } from '../db/driver-errors.js';
import { UnprocessableError } from '../errors.js';
import { unitOfWork } from '../db/unit-of-work.js';
import {
  deleteIdempotencyKey,
  deleteIdempotencyKeysExpiredBy,
  findIdempotencyKey,
  insertIdempotencyKey,
  storeIdempotentResponse,
} from './idempotency.repository.js';

/**
 * Idempotency-Key on POST (docs/conventions.md, draft-ietf-httpapi-idempotency-key-header): a retry with the
 * same key and the same request replays the first response; the same key with a different
 * request is refused with 422.
 *
 * The key is claimed inside the same transaction as the write it protects, so the write and the
 * record of its response commit or vanish together: a request that failed leaves no key behind
 * and may be retried. Concurrent requests with one key serialize on the key's row (SQLite's
 * write lock; PostgreSQL's unique-index wait), so exactly one does the work and the others replay
 * its committed response. Keys are scoped per caller and kept for KEY_LIFETIME_MS.
 */
export const KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x21-\\x7E]+$',
      'x-error': 'must be 1–255 visible ASCII characters (a UUID is a good choice)',
      description: 'makes the POST safe to retry: the same key and body replay the first response for 24 hours',
    }),
  ),
});

/** What is stored and replayed: everything a route needs to send the response again. */
export interface StoredResponse {
  status: number;
  body: unknown;
  location?: string;
  /** The record's stored version, from which the ETag of the replayed representation is made. */
  version?: number;
}

export interface IdempotentResult extends StoredResponse {
  replayed: boolean;
}

/**
 * The Idempotency-Key a request claims, and whose keys it is one of: what the request's context
 * resolved when it arrived (auth/context.ts), so that this engine knows nothing of callers.
 */
export interface IdempotencyClaim {
  /** The Idempotency-Key header; undefined: the request sent none. */
  key: string | undefined;
  /** Whose keys: a response is replayed only to a request of the same scope. */
  scope: string;
}

/**
 * Runs `work` in a unit of work, once per Idempotency-Key. `fingerprint` says what makes two
 * requests the same; by default the method, the target and the parsed body (a route whose body is
 * a stream it reads itself gives its own: streamedFingerprint).
 */
export async function runIdempotent(
  db: Db,
  request: FastifyRequest,
  { key, scope }: IdempotencyClaim,
  work: (trx: Trx) => Promise<StoredResponse>,
  fingerprint?: string,
): Promise<IdempotentResult> {
  if (key === undefined) {
    return { ...(await unitOfWork(db, work)), replayed: false };
  }
  fingerprint ??= fingerprintOf(request);
  // The key is claimed (its row inserted) before the work: a concurrent request with the same key
  // waits on that row (SQLite's write lock; PostgreSQL's unique index) until this transaction
  // ends, then fails to claim it and, on its next pass, replays the committed response. (Claiming
  // after the work would let it run the work too and fail on something else, an email taken.)
  for (let attempt = 1; ; attempt++) {
    try {
      return await unitOfWork(db, async (trx) => {
        const existing = await findIdempotencyKey(trx, scope, key);
        const now = nowTimestamp();
        if (existing && existing.expires_at > now) {
          if (existing.fingerprint !== fingerprint) throw keyReused(key);
          return { ...(JSON.parse(existing.response) as StoredResponse), replayed: true };
        }
        if (existing) await deleteIdempotencyKey(trx, scope, key);
        await insertIdempotencyKey(trx, {
          scope,
          key,
          fingerprint,
          now,
          expiresAt: new Date(Date.now() + KEY_LIFETIME_MS).toISOString(),
        });
        const response = await work(trx);
        if (response.status >= 200 && response.status < 300) {
          await storeIdempotentResponse(trx, scope, key, JSON.stringify(response));
        } else {
          // Only successes are replayed; a refusal leaves the key free for a corrected retry.
          await deleteIdempotencyKey(trx, scope, key);
        }
        return { ...response, replayed: false };
      });
    } catch (error) {
      if (attempt >= MAX_CLAIM_ATTEMPTS || !isUniqueViolation(error, 'idempotency_keys.key')) throw error;
    }
  }
}

/**
 * Whether the request's Idempotency-Key already holds an answer for its caller: a retry that will
 * replay it (if its request is the same), which a route that refuses early (before it reads a body)
 * lets through to be compared.
 */
export async function isKeyAnswered(db: Db, { key, scope }: IdempotencyClaim): Promise<boolean> {
  if (key === undefined) return false;
  const existing = await findIdempotencyKey(db, scope, key);
  return existing !== undefined && existing.response !== '' && existing.expires_at > nowTimestamp();
}

/** A claim fails only when another request held the key; the next pass finds its outcome. */
const MAX_CLAIM_ATTEMPTS = 5;

/**
 * Keys are pruned once past their lifetime (db/retention.ts), a batch at a time: a key carries its
 * own end (expires_at, KEY_LIFETIME_MS after its first use), so the cutoff is now.
 */
export const IDEMPOTENCY_KEYS_RETENTION: RetainedTable = {
  table: 'idempotency_keys',
  oldestBy: 'expires_at',
  time: 'created_at',
  retentionSeconds: 0,
  prune: deleteIdempotencyKeysExpiredBy,
};

/** Same method, same target, same body (whatever its media type, compared as parsed data). */
function fingerprintOf(request: FastifyRequest): string {
  return createHash('sha256')
    .update(`${request.method} ${request.url}\n`)
    .update(canonicalJson(request.body))
    .digest('base64url');
}

/**
 * What makes two requests with a streamed body (an uploaded file) the same: the method, the path,
 * the options the route read from the query and headers (defaults filled in, so that leaving one
 * out and giving its default are the same request), and the SHA-256 of the body's bytes.
 */
export function streamedFingerprint(
  request: FastifyRequest,
  options: Record<string, unknown>,
  bodyDigest: string,
): string {
  const path = request.url.split('?')[0]!;
  return createHash('sha256')
    .update(`${request.method} ${path}\n`)
    .update(canonicalJson(options))
    .update(`\n${bodyDigest}`)
    .digest('base64url');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function keyReused(key: string): UnprocessableError {
  return new UnprocessableError(
    `Idempotency-Key ${key} was already used with a different request; use a new key for a new request.`,
    [{ in: 'header', pointer: '#/idempotency-key', detail: 'was used with a different request' }],
    'idempotency-key-reused',
  );
}
