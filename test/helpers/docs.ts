import { readFileSync } from 'node:fs';

/**
 * rowi's documentation: the README (the front page) and docs/. The files whose curl examples are
 * run (test/docs/readme.process.test.ts), in the order they run against one server: the start
 * tutorial first (it creates the records the others use), then the guide, the README's example last.
 */
export const EXAMPLE_FILES = [
  'docs/start.md',
  'docs/guide.md',
  'docs/orders.md',
  'docs/conventions.md',
  'docs/security.md',
  'docs/access.md',
  'docs/limits.md',
  'docs/operations.md',
  'docs/backups.md',
  'docs/bulk.md',
  'docs/reading.md',
  'docs/events.md',
  'README.md',
] as const;

/** Every documentation file the reference checks read. */
export const DOC_FILES = [
  'README.md',
  'docs/start.md',
  'docs/guide.md',
  'docs/orders.md',
  'docs/conventions.md',
  'docs/security.md',
  'docs/errors.md',
  'docs/limits.md',
  'docs/operations.md',
  'docs/deployment.md',
  'docs/backups.md',
  'docs/bulk.md',
  'docs/reading.md',
  'docs/events.md',
  'docs/guarantees.md',
  'docs/development.md',
  'docs/performance.md',
] as const;

export const readDoc = (file: string): string => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

/** All of the documentation as one text, file after file. */
export const documentation = (): string => DOC_FILES.map(readDoc).join('\n');
