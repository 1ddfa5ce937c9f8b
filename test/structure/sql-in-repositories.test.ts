import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SOURCES, sourcesOf } from '../helpers/sources.js';

/**
 * SQL lives in repositories (`*.repository.ts`, one per table family, taking the database or the
 * transaction first) and in the storage layer itself (src/db: the connection, migrations, paging
 * and version helpers that repositories share). Everywhere else a query is a call of a repository.
 */

/** Kysely's query builders and raw SQL, as code writes them. */
const SQL = [
  /\.(selectFrom|insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\(/,
  /\bsql\s*(<[^>]*>)?`/,
  /\bsql\.(raw|join|ref|lit|id|table)\(/,
  /\.executeQuery\(/,
];

/** The lines of a file that write SQL, as "file:line: text". */
function sqlLinesOf(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .flatMap((line, index) =>
      SQL.some((pattern) => pattern.test(line)) && !/^\s*(\/\/|\*)/.test(line)
        ? [`${relative(SOURCES, path)}:${index + 1}: ${line.trim()}`]
        : [],
    );
}

describe('SQL only in repositories', () => {
  it('no file outside *.repository.ts and src/db writes a query', () => {
    const outside = sourcesOf(SOURCES).filter(
      (path) => !path.endsWith('.repository.ts') && !relative(SOURCES, path).startsWith('db/'),
    );
    expect(outside.length).toBeGreaterThan(50);
    expect(outside.flatMap(sqlLinesOf)).toEqual([]);
  });

  it('the check sees SQL where it is: every repository writes some', () => {
    const repositories = sourcesOf(SOURCES).filter((path) => path.endsWith('.repository.ts'));
    expect(repositories.length).toBeGreaterThan(5);
    expect(repositories.filter((path) => sqlLinesOf(path).length === 0).map((path) => relative(SOURCES, path))).toEqual(
      [],
    );
  });
});
