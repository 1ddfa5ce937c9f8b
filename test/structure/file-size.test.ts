import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SOURCES, sourcesOf } from '../helpers/sources.js';

/**
 * A source file that grows past 250 lines most often holds more than one concern. This is a
 * warning, not a gate: the file is named on the test output so that its author looks at it, and
 * splits it by concern where it has two (docs/architecture.md), never just to pass a count.
 * Line length is Prettier's (npm run lint), not this file's.
 */

const MOST_LINES = 250;

function linesOf(path: string): number {
  const text = readFileSync(path, 'utf8');
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

/** The files of `files` longer than `most` lines, as "path: N lines", longest first. */
function longerThan(files: string[], most: number): string[] {
  return files
    .map((path) => ({ path, lines: linesOf(path) }))
    .filter(({ lines }) => lines > most)
    .sort((a, b) => b.lines - a.lines)
    .map(({ path, lines }) => `${relative(SOURCES, path)}: ${lines} lines`);
}

describe('long source files', () => {
  it('names each file in src over 250 lines as a warning', () => {
    const files = sourcesOf(SOURCES);
    expect(files.length).toBeGreaterThan(100);
    for (const line of longerThan(files, MOST_LINES)) {
      console.warn(`warning: src/${line}; does it hold more than one concern? (docs/architecture.md)`);
    }
  });

  it('the check counts lines: with a bound of 200 it names files, each truly over 200 lines', () => {
    const named = longerThan(sourcesOf(SOURCES), 200);
    expect(named.length).toBeGreaterThan(0);
    for (const line of named) {
      const [path, count] = line.split(': ');
      const text = readFileSync(`${SOURCES}/${path}`, 'utf8');
      expect(text.split('\n').length - (text.endsWith('\n') ? 1 : 0)).toBe(Number.parseInt(count!, 10));
      expect(Number.parseInt(count!, 10)).toBeGreaterThan(200);
    }
  });
});
