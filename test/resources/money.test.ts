import { Value } from 'typebox/value';
import { describe, expect, it } from 'vitest';
import { Amount, Price, formatMinorUnits, toMinorUnits } from '../../src/resources/items/money.js';

/** Money as decimal strings outside and integer minor units inside, never through a binary float. */
describe('money', () => {
  it.each([
    ['0', 0],
    ['12', 1200],
    ['12.5', 1250],
    ['12.50', 1250],
    ['0.05', 5],
    ['9999999999.99', 999_999_999_999],
  ])('toMinorUnits(%j) = %d', (price, minor) => {
    expect(toMinorUnits(price)).toBe(minor);
  });

  it.each([
    [0, '0.00'],
    [5, '0.05'],
    [1250, '12.50'],
    [100, '1.00'],
    [Number.MAX_SAFE_INTEGER, '90071992547409.91'],
  ])('formatMinorUnits(%d) = %j', (minor, text) => {
    expect(formatMinorUnits(minor)).toBe(text);
  });

  it('0.1 + 0.2 in minor units is exactly 0.30', () => {
    expect(formatMinorUnits(toMinorUnits('0.1') + toMinorUnits('0.2'))).toBe('0.30');
  });

  it.each(['12.50', '0', '12.5', '9999999999.99'])('Price accepts %j', (price) => {
    expect(Value.Check(Price, price)).toBe(true);
  });

  it.each(['-1', '01', '12.505', '1e3', ' 12', '12.', '.5', '10000000000', 'NaN'])('Price refuses %j', (price) => {
    expect(Value.Check(Price, price)).toBe(false);
  });

  it('every amount formatMinorUnits writes is a valid Amount', () => {
    for (const minor of [0, 1, 99, 100, 123_456, Number.MAX_SAFE_INTEGER])
      expect(Value.Check(Amount, formatMinorUnits(minor)), String(minor)).toBe(true);
  });
});
