import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../src/errors.js';
import { expandablePaths, parseExpand, type Expandable } from '../../src/http/expand.js';
import { MOVEMENT_RELATIONS, ORDER_RELATIONS } from '../../src/api/related-records.schema.js';

/** The parsing of expand= (http/expand.ts), on the relations orders and stock movements declare. */
const refusal = (spec: Expandable, value: string | string[]) => {
  try {
    parseExpand(spec, value);
  } catch (error) {
    expect(error).toBeInstanceOf(BadRequestError);
    return (error as BadRequestError).errors![0]!.detail;
  }
  throw new Error(`${String(value)} was taken`);
};

describe('expand= paths', () => {
  it('offers every walk of at most two relations that visits no resource twice', () => {
    expect(expandablePaths(ORDER_RELATIONS)).toEqual(['user', 'lines.item', 'lines.item.stock']);
    expect(expandablePaths(MOVEMENT_RELATIONS)).toEqual(['order', 'order.user', 'order.lines.item']);
  });

  it('parses comma-separated and repeated paths, with the resources each embeds', () => {
    expect(parseExpand(ORDER_RELATIONS, ['user,lines.item.stock', 'lines.item'])).toEqual([
      { path: 'user', resources: ['users'] },
      { path: 'lines.item.stock', resources: ['items', 'stock'] },
      { path: 'lines.item', resources: ['items'] },
    ]);
  });

  it('refuses, naming the path: unknown, a cycle, three levels, twice, empty, too long, too many', () => {
    expect(refusal(ORDER_RELATIONS, 'lines')).toContain('lines, which is no related record');
    expect(refusal(ORDER_RELATIONS, 'lines.item.stock.item')).toContain('cycle (orders → items → stock → items)');
    expect(refusal(MOVEMENT_RELATIONS, 'order.lines.item.stock')).toContain('3 levels deep');
    expect(refusal(ORDER_RELATIONS, ['user', 'user'])).toContain('user twice');
    expect(refusal(ORDER_RELATIONS, 'user..x')).toContain('empty');
    expect(refusal(ORDER_RELATIONS, 'u'.repeat(65))).toContain('65 characters');
    expect(refusal(ORDER_RELATIONS, Array(11).fill('user').join(','))).toContain('11 paths');
    expect(refusal(ORDER_RELATIONS, Array(1000).fill('user').join(','))).toContain('at most 650');
  });

  it('any text is either paths the root offers, each once, or a 400 pointing at expand (fast-check)', () => {
    const offered = new Set(expandablePaths(ORDER_RELATIONS));
    const segment = fc.constantFrom('user', 'lines', 'item', 'stock', 'order', '', 'x', 'lines.item');
    const text = fc.array(
      fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('.')),
      {
        minLength: 1,
        maxLength: 12,
      },
    );
    fc.assert(
      fc.property(text, fc.string(), (paths, noise) => {
        for (const value of [paths.join(','), paths, noise]) {
          try {
            const parsed = parseExpand(ORDER_RELATIONS, value).map((path) => path.path);
            expect(parsed.every((path) => offered.has(path))).toBe(true);
            expect(new Set(parsed).size).toBe(parsed.length);
          } catch (error) {
            expect(error).toBeInstanceOf(BadRequestError);
            expect((error as BadRequestError).errors![0]!.pointer).toBe('#/expand');
          }
        }
      }),
      { seed: 20_261_126, numRuns: 300 },
    );
  });
});
