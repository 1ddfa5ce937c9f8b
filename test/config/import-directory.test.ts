import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importDirectoryOf } from '../../src/config/limits.settings.js';

/**
 * Where uploads wait: a file is named by its operation's id, unique only within one database, so
 * two rowi on one machine with different databases (both with an operation 1) must not share the
 * folder, while every process of one rowi must find the same one.
 */
const of = (settings: Partial<{ importDirectory: string; data: string; databaseUrl: string }>) =>
  importDirectoryOf({ importDirectory: '', data: './data/rowi.db', databaseUrl: '', ...settings });

describe('the import folder (ROWI_IMPORT_DIRECTORY unset)', () => {
  it('when two SQLite files are served, then each has its own folder under rowi-imports; the same file, however named, has one', () => {
    const first = of({ data: '/srv/a/rowi.db' });
    expect(first.startsWith(join(tmpdir(), 'rowi-imports') + '/')).toBe(true);
    expect(of({ data: '/srv/b/rowi.db' })).not.toBe(first);
    expect(of({ data: '/srv/a/../a/rowi.db' })).toBe(first);
    expect(of({ data: '/srv/a/rowi.db' })).toBe(first);
  });

  it('when PostgreSQL is used, then each database or schema has its own folder, whatever the password', () => {
    const url = 'postgres://rowi:secret@db.example:5432/shop';
    expect(of({ databaseUrl: url })).toBe(of({ databaseUrl: 'postgres://rowi:other@db.example:5432/shop' }));
    expect(of({ databaseUrl: url })).not.toBe(of({ databaseUrl: 'postgres://rowi:secret@db.example:5432/staging' }));
    expect(of({ databaseUrl: `${url}?options=-c%20search_path%3Dt1` })).not.toBe(
      of({ databaseUrl: `${url}?options=-c%20search_path%3Dt2` }),
    );
    expect(of({ databaseUrl: url })).not.toContain('secret');
  });

  it('when the database is in memory, then the folder is the process’s own', () => {
    expect(of({ data: ':memory:' })).toBe(of({ data: ':memory:' }));
    expect(of({ data: ':memory:' })).not.toBe(of({ data: '/srv/a/rowi.db' }));
  });

  it('when ROWI_IMPORT_DIRECTORY is set, then it is used as it is', () => {
    expect(of({ importDirectory: '/var/spool/rowi', data: '/srv/a/rowi.db' })).toBe('/var/spool/rowi');
  });
});
