import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SOURCES, sourcesOf } from '../helpers/sources.js';

/**
 * Every source file stays under 250 lines: a file that grows past it holds more than one concern
 * and is split by concern (docs/architecture.md), not trimmed.
 */

const MOST_LINES = 249;

function linesOf(path: string): number {
  const text = readFileSync(path, 'utf8');
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe('files under 250 lines', () => {
  it('no file in src has 250 lines or more', () => {
    const files = sourcesOf(SOURCES);
    expect(files.length).toBeGreaterThan(100);
    const long = files.filter((path) => linesOf(path) > MOST_LINES).map((path) => `${relative(SOURCES, path)}: ${linesOf(path)} lines`);
    expect(long).toEqual([]);
  });

  it('the check sees long files: with a bound of 200 lines it lists the longest', () => {
    const long = sourcesOf(SOURCES).filter((path) => linesOf(path) > 200);
    expect(long.length).toBeGreaterThan(0);
    expect(long.every((path) => readFileSync(path, 'utf8').split('\n').length > 200)).toBe(true);
  });
});
