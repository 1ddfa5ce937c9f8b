import * as crypto from 'node:crypto';
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

/**
 * API keys: `rowi_` + an 8-character public id + `_` + 256 random bits (base64url), e.g.
 * `rowi_k3x9a0qe_Vb7…`. The readable start tells a leaked key's origin at a glance (and lets
 * secret scanners find it); the public part (`prefix`) finds the stored row; only a SHA-256
 * hash of the whole key is kept, compared in constant time.
 */
const KEY_PATTERN = /^rowi_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$/;
const PREFIX_LENGTH = 'rowi_'.length + 8;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

export interface NewApiKey {
  /** The whole key: shown to its owner once, never stored. */
  key: string;
  prefix: string;
  secretHash: string;
}

export function generateApiKey(): NewApiKey {
  let id = '';
  for (let index = 0; index < 8; index++) id += ALPHABET[randomInt(ALPHABET.length)];
  const key = `rowi_${id}_${randomBytes(32).toString('base64url')}`;
  return { key, prefix: key.slice(0, PREFIX_LENGTH), secretHash: hashApiKey(key) };
}

/** The public prefix of a well-formed key, or undefined when the text cannot be a rowi key. */
export function prefixOf(key: string): string | undefined {
  return KEY_PATTERN.test(key) ? key.slice(0, PREFIX_LENGTH) : undefined;
}

/**
 * SHA-256 of the key, base64url. Every authenticated request hashes its key, so the one-shot
 * crypto.hash (Node >= 20.12; about 5 times cheaper than a Hash object) is used where it exists.
 */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string }).hash;
export const hashApiKey: (key: string) => string =
  oneShotHash === undefined
    ? (key) => createHash('sha256').update(key).digest('base64url')
    : (key) => oneShotHash('sha256', key, 'base64url');

/** Constant-time comparison of two hashes (both base64url SHA-256, so of equal length). */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
