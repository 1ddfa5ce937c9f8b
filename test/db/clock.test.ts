import { describe, expect, it } from 'vitest';
import { toTimestamp } from '../../src/db/clock.js';

/** RFC 3339 date-times into rowi's stored form: UTC, milliseconds, years 0001 to 9999. */
describe('toTimestamp', () => {
  it.each([
    ['2026-11-25T10:00:00Z', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25t10:00:00.5z', '2026-11-25T10:00:00.500Z'],
    ['2026-11-25T10:00:00+01:00', '2026-11-25T09:00:00.000Z'],
    ['2024-02-29T23:59:59.999-00:30', '2024-03-01T00:29:59.999Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
  ])('%s → %s', (text, stored) => {
    expect(toTimestamp(text)).toBe(stored);
  });

  it.each([
    '2026-11-25',
    '2026-11-25T10:00:00',
    '2026-11-25 10:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-11-31T00:00:00Z',
    '2026-11-25T24:00:00Z',
    '2026-11-25T23:59:60Z',
    '2026-11-25T10:00:00+24:00',
    '0001-01-01T00:30:00+01:00',
    '+010000-01-01T00:00:00Z',
    'yesterday',
  ])('refuses %j', (text) => {
    expect(toTimestamp(text)).toBeUndefined();
  });
});
