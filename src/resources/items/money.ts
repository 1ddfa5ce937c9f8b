import Type from 'typebox';

/**
 * Money crosses the API as a decimal string ("12.50") and is stored as integer minor units
 * (1250), so no amount ever passes through a binary float. Input may omit the decimals or give
 * one ("12", "12.5"); output always has two.
 */
export const Price = Type.String({
  pattern: '^(0|[1-9][0-9]{0,9})(\\.[0-9]{1,2})?$',
  maxLength: 13,
  'x-error':
    'must be a decimal string with at most 2 decimal places, 0 or more and below 10000000000 (for example "12.50")',
  description: 'decimal string, at most 2 decimal places, ≥ 0 (for example "12.50")',
  examples: ['12.50'],
});

/**
 * A sum of money rowi computes (a line's total, an order's): two decimal places, and at most what
 * integer minor units can hold exactly (2^53 − 1 cents: orders whose total would be larger are
 * refused), so 14 digits before the point.
 */
export const Amount = Type.String({
  pattern: '^(0|[1-9][0-9]{0,13})\\.[0-9]{2}$',
  maxLength: 17,
  description: 'decimal string with 2 places (for example "125.00"), below 90071992547409.92',
  examples: ['125.00'],
});

/** A decimal string already validated against Price → minor units. */
export function toMinorUnits(price: string): number {
  const point = price.indexOf('.');
  if (point === -1) return Number(price) * 100;
  const cents = Number(price.slice(point + 1));
  return Number(price.slice(0, point)) * 100 + (price.length - point === 2 ? cents * 10 : cents);
}

/** Minor units → the decimal string with two places. */
export function formatMinorUnits(minor: number): string {
  const whole = Math.trunc(minor / 100);
  const cents = minor % 100;
  return `${whole}.${cents < 10 ? '0' : ''}${cents}`;
}
