import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ALL_SCOPES, DATA_RESOURCES } from '../src/auth/policy.js';
import { PROBLEM_TYPES } from '../src/errors.js';
import { POLICY_NAMES } from '../src/limits/rate-limiter.js';

/**
 * The catalogues the code keeps once (problem types, scopes, rate-limit policies) against the
 * README's reference tables: a type, scope or policy added, renamed or dropped on one side only
 * fails here. (The settings' table is checked the same way in config.test.ts.)
 */

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The body rows of the first table after `heading`, as cells. */
function tableAfter(heading: string): string[][] {
  const lines = README.split('\n');
  const start = lines.findIndex((line) => line === heading);
  expect(start, `README has no heading ${heading}`).toBeGreaterThan(-1);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    rows.push(line.split('|').slice(1, -1).map((cell) => cell.trim()));
  }
  // The header row and its separator.
  return rows.slice(2);
}

const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);

describe('README reference tables against the code', () => {
  it('Errors: the table lists every problem type, each with the status rowi answers it with, and no other', () => {
    const documented = Object.fromEntries(tableAfter('## Errors').map(([status, type]) => [backticked(type!)[0], Number(status)]));
    const coded = Object.fromEntries(Object.entries(PROBLEM_TYPES).map(([type, { status }]) => [type, status]));
    expect(Object.keys(documented).length).toBeGreaterThan(30);
    expect(documented).toEqual(coded);
  });

  it('Roles and scopes: the resources named are those of the scopes, data and administration alike', () => {
    const section = README.slice(README.indexOf('### Roles and scopes'));
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
