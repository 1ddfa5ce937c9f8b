import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONSOLE_SOURCES, SOURCES, sourcesOf } from '../helpers/sources.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * A source file that grows past 250 lines most often holds more than one concern. This is a
 * warning, not a gate: the file is named on the test output so that its author looks at it, and
 * splits it by concern where it has two (docs/architecture.md), never just to pass a count.
 * Line length is Prettier's (npm run lint), not this file's.
 */

const MOST_LINES = 250;
/** Past this a file is too big to read whole: the gate (docs/architecture.md). */
const MOST_LINES_EVER = 500;

function linesOf(path: string): number {
  const text = readFileSync(path, 'utf8');
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

/** The files of `files` longer than `most` lines, as "path: N lines" (path from `root`), longest first. */
function longerThan(files: string[], most: number, root = SOURCES): string[] {
  return files
    .map((path) => ({ path, lines: linesOf(path) }))
    .filter(({ lines }) => lines > most)
    .sort((a, b) => b.lines - a.lines)
    .map(({ path, lines }) => `${relative(root, path)}: ${lines} lines`);
}

describe('long source files', () => {
  it('names each file in src over 250 lines as a warning', () => {
    const files = sourcesOf(SOURCES);
    expect(files.length).toBeGreaterThan(100);
    for (const line of longerThan(files, MOST_LINES)) {
      console.warn(`warning: src/${line}; does it hold more than one concern? (docs/architecture.md)`);
    }
  });

  it('no file in src is over 500 lines', () => {
    expect(longerThan(sourcesOf(SOURCES), MOST_LINES_EVER)).toEqual([]);
  });

  it('no file of the console (console/src) is over 500 lines either', () => {
    const files = sourcesOf(CONSOLE_SOURCES);
    expect(files.length).toBeGreaterThan(10);
    expect(longerThan(files, MOST_LINES_EVER, CONSOLE_SOURCES)).toEqual([]);
  });

  it('the check names exactly the files over the bound, longest first, with their line counts', () => {
    const folder = tempFolder('file-size-');
    const file = (name: string, lines: number, newlineAtEnd = true) => {
      const path = join(folder, name);
      writeFileSync(path, Array.from({ length: lines }, (_, n) => `line ${n}`).join('\n') + (newlineAtEnd ? '\n' : ''));
      return path;
    };
    const files = [file('short.ts', 3), file('at-bound.ts', 4), file('over.ts', 5, false), file('longest.ts', 9)];
    expect(longerThan(files, 4, folder)).toEqual(['longest.ts: 9 lines', 'over.ts: 5 lines']);
  });
});
