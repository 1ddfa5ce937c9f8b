import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { concretePath, documentedOperations, type DocumentedOperation } from '../helpers/openapi.js';
import { expectProblem } from '../helpers/problems.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Every operation takes the query parameters the document lists for it and no other: an unknown
 * name or a malformed value is 400 invalid-query naming the parameter, before anything is done.
 */
let test: TestApp;
let operations: DocumentedOperation[];
beforeAll(async () => {
  // Load shedding off: a walk of every operation on a busy machine is no overload under test.
  test = await startApp({ ROWI_BACKUP_DIR: tempFolder('query-backups'), ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  operations = documentedOperations(test.app.swagger());
});
afterAll(() => test.close());

const operationsStored = async () => (await test.call({ url: '/v1/operations' })).json.data as unknown[];

describe('query parameters an operation does not take', () => {
  it('every operation of the OpenAPI document: a query parameter it does not list is 400 invalid-query naming it', async () => {
    const wrong: string[] = [];
    expect(operations.length).toBeGreaterThan(100);
    for (const { method, path } of operations) {
      const reply = await test.call({ method: method as 'GET', url: `${concretePath(path)}?unknown_parameter=1` });
      const problem = reply.json as { type?: string; errors?: { pointer: string }[] } | undefined;
      if (
        reply.status !== 400 ||
        (method !== 'HEAD' &&
          (problem?.type !== '/problems/invalid-query' || problem.errors?.[0]?.pointer !== '#/unknown_parameter'))
      )
        wrong.push(`${method} ${path}: ${reply.status} ${reply.text.slice(0, 200)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('every integer query parameter of the OpenAPI document: a value that is no integer is 400 invalid-query naming it', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const { method, path, operation } of operations) {
      if (method === 'HEAD') continue;
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== 'query' || parameter.schema?.type !== 'integer') continue;
        checked++;
        const reply = await test.call({ method: method as 'GET', url: `${concretePath(path)}?${parameter.name}=abc` });
        const problem = reply.json as { type?: string; errors?: { pointer: string }[] } | undefined;
        if (reply.status !== 400 || problem?.errors?.[0]?.pointer !== `#/${parameter.name}`)
          wrong.push(`${method} ${path}?${parameter.name}=abc: ${reply.status} ${reply.text.slice(0, 200)}`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(wrong).toEqual([]);
  });

  it('POST /v1/backups: 400 invalid-query and no backup queued when the query names a file', async () => {
    const problem = expectProblem(
      await test.call({ method: 'POST', url: '/v1/backups?file=../x' }),
      400,
      'invalid-query',
    );
    expect(problem.detail).toBe('Query parameter file is not a known query parameter; this operation takes none.');
    expect(problem.errors).toEqual([
      { in: 'query', pointer: '#/file', detail: 'is not a known query parameter; this operation takes none' },
    ]);
    expect(await operationsStored()).toEqual([]);
  });

  it('GET /v1/operations/{id}/errors: 400 invalid-query when limit is given, which it does not take', async () => {
    const problem = expectProblem(await test.call({ url: '/v1/operations/1/errors?limit=abc' }), 400, 'invalid-query');
    expect(problem.errors?.[0]?.pointer).toBe('#/limit');
  });

  it('POST /v1/items/import: 400 invalid-query naming the options it takes, before the file is read or an operation made, when an option is misspelt', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/items/import?mdoe=partial',
      headers: { 'content-type': 'text/csv' },
      body: 'sku,name,price\nQ-1,Query,1.00\n',
    });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.detail).toBe(
      'Query parameter mdoe is not a known query parameter; this operation takes mode, on_conflict, dry_run.',
    );
    expect(await operationsStored()).toEqual([]);
    expect((await test.call({ url: '/v1/items?sku=Q-1' })).json.data).toEqual([]);
  });

  it('GET /v1/users/{id}: 400 invalid-query when the query holds a parameter of the list (limit), which a read does not take', async () => {
    expectProblem(await test.call({ url: '/v1/users/1?limit=1' }), 400, 'invalid-query');
  });

  it('GET /health/live: 400 invalid-query for any query parameter, without credentials', async () => {
    const problem = expectProblem(await test.call({ url: '/health/live?verbose=1', key: null }), 400, 'invalid-query');
    expect(problem.errors?.[0]?.pointer).toBe('#/verbose');
  });
});
