import { describe, expect, it } from 'vitest';
import { ALL_SCOPES, DATA_RESOURCES } from '../../src/auth/policy.js';
import { PROBLEM_TYPES } from '../../src/problem-types.js';
import { POLICY_NAMES } from '../../src/rate-limits/rate-limiter.js';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { documentation, readDoc } from '../helpers/docs.js';
import { regenerated, TABLES, writeTable } from '../helpers/reference-tables.js';

/**
 * The catalogues the code keeps once (problem types, scopes, rate-limit policies) against the
 * documentation's reference tables (DOCS and docs/): a type, scope or policy added, renamed or dropped on one side only
 * fails here. (The settings' table is checked the same way in test/config/config.test.ts.)
 */

const DOCS = documentation();

/** The body rows of the first table after `heading`, as cells. */
function tableAfter(heading: string): string[][] {
  const lines = DOCS.split('\n');
  const start = lines.findIndex((line) => line === heading);
  expect(start, `DOCS has no heading ${heading}`).toBeGreaterThan(-1);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  }
  // The header row and its separator.
  return rows.slice(2);
}

const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);

describe('DOCS reference tables against the code', () => {
  it('Errors: the table lists every problem type, each with the status rowi answers it with, and no other', () => {
    const documented = Object.fromEntries(
      tableAfter('## Errors').map(([status, type]) => [backticked(type!)[0], Number(status)]),
    );
    const coded = Object.fromEntries(Object.entries(PROBLEM_TYPES).map(([type, { status }]) => [type, status]));
    expect(Object.keys(documented).length).toBeGreaterThan(30);
    expect(documented).toEqual(coded);
  });

  it('Roles and scopes: the resources named are those of the scopes, data and administration alike', () => {
    const section = DOCS.slice(DOCS.indexOf('### Roles and scopes'));
    const sentence = /resources are (.+?) \(data\), (.+?) \(administration\)/s.exec(section);
    expect(sentence, 'the sentence naming the resources').not.toBeNull();
    const data = backticked(sentence![1]!);
    const administration = backticked(sentence![2]!);
    expect(data).toEqual([...DATA_RESOURCES]);
    const resourcesOfScopes = [...new Set(ALL_SCOPES.map((scope) => scope.slice(0, scope.lastIndexOf(':'))))];
    expect([...data, ...administration].sort()).toEqual(resourcesOfScopes.sort());
  });

  it('Limits: the policies table names every rate-limit policy, and no other', () => {
    const rows = tableAfter('## Limits').filter((cells) => cells.length === 4);
    const documented = new Set(rows.map(([policy]) => backticked(policy!)[0]));
    expect([...documented].sort()).toEqual([...POLICY_NAMES].sort());
  });
});

describe('the documentation as files', () => {
  it('README.md is the front page: under 10 KB, linking every file of docs/', () => {
    const readme = readDoc('README.md');
    expect(Buffer.byteLength(readme)).toBeLessThan(10 * 1024);
    for (const file of readdirSync(new URL('../../docs', import.meta.url)).filter((name) => name.endsWith('.md')))
      expect(readme, `README links docs/${file}`).toContain(`](docs/${file})`);
  });

  it('every relative link of the README and docs/ names a file that exists, and every #anchor a heading of it', () => {
    const broken: string[] = [];
    for (const file of [
      'README.md',
      ...readdirSync(new URL('../../docs', import.meta.url))
        .filter((name) => name.endsWith('.md'))
        .map((name) => `docs/${name}`),
    ]) {
      for (const [, target] of readDoc(file).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:)/.test(target!)) continue;
        const [path, anchor] = target!.split('#');
        const linked = path === '' ? file : join(dirname(file), path!);
        if (!existsSync(new URL(`../../${linked}`, import.meta.url))) {
          broken.push(`${file}: ${target} (no ${linked})`);
          continue;
        }
        if (anchor !== undefined && linked.endsWith('.md') && !headingSlugs(readDoc(linked)).includes(anchor))
          broken.push(`${file}: ${target} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
  });
});

/** GitHub's anchors of a Markdown file's headings. */
function headingSlugs(markdown: string): string[] {
  return [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map((match) =>
    match[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\w\- ]/g, '')
      .replaceAll(' ', '-'),
  );
}

describe('the generated reference tables', () => {
  it.each(TABLES.map((table) => [`${table.file}: ${table.name}`, table] as const))(
    '%s is what the code generates (npm run docs rewrites it)',
    (_name, table) => {
      if (process.env.ROWI_TEST_UPDATE_DOCS === '1') writeTable(table);
      const { current, expected } = regenerated(table);
      expect(current).toBe(expected);
    },
  );
});
