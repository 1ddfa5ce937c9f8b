import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../src/http/paging.js';

/** Keyset cursors: opaque to callers, and refused when anything of them is changed. */
describe('cursors', () => {
  const position = { sort: 'name,-created_at,id', values: ['Zoë', '2026-11-25T10:00:00.000Z', 42] };

  it('a cursor gives back the position it was made from', () => {
    expect(decodeCursor(encodeCursor(position))).toEqual(position);
  });

  it('is URL-safe text without padding', () => {
    expect(encodeCursor(position)).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  });

  it('refuses a cursor whose payload or check was changed, cut, or extended', () => {
    const cursor = encodeCursor(position);
    const [payload, check] = cursor.split('.') as [string, string];
    const other = encodeCursor({ ...position, values: ['Adam', '2026-11-25T10:00:00.000Z', 1] });
    expect(decodeCursor(`${other.split('.')[0]}.${check}`)).toBeUndefined();
    expect(decodeCursor(`${payload}.${check.slice(1)}`)).toBeUndefined();
    expect(decodeCursor(payload)).toBeUndefined();
    expect(decodeCursor(`${cursor}.x`)).toBeUndefined();
    expect(decodeCursor('')).toBeUndefined();
    expect(decodeCursor('not-a-cursor')).toBeUndefined();
  });

  it('refuses a well-signed payload that does not hold a position', () => {
    // Built the way encodeCursor builds one, from a value that is not [sort, ...values].
    const forged = encodeCursor({ sort: 'id', values: [] }).replace(
      /^[^.]+/,
      Buffer.from('{"a":1}').toString('base64url'),
    );
    expect(decodeCursor(forged)).toBeUndefined();
  });
});
