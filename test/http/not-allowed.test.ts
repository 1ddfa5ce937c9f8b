import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { concretePath, documentedOperations } from '../helpers/openapi.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

/**
 * Every path answers a method it does not serve 405 with an Allow of what it serves (and OPTIONS
 * 204 with the same Allow), the document being the judge of what each path serves: a path whose
 * literal segment stands where a sibling has a parameter (/v1/users/batch beside /v1/users/{id})
 * serves its own methods only.
 */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const ORDER = [...METHODS, 'OPTIONS'];

let test: TestApp;
let served: Map<string, string[]>;
beforeAll(async () => {
  // Load shedding off: a walk of every path on a busy machine is no overload under test.
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  served = new Map();
  for (const { method, path } of documentedOperations(test.app.swagger()))
    served.set(path, [...(served.get(path) ?? []), method]);
});
afterAll(() => test.close());

const allowOf = (methods: string[]) =>
  ORDER.filter((method) => method === 'OPTIONS' || methods.includes(method)).join(', ');

describe('methods a path does not serve', () => {
  it('every path of the OpenAPI document: each method it does not list is 405 method-not-allowed with an Allow of those it lists, and OPTIONS is 204 with that Allow', async () => {
    const wrong: string[] = [];
    expect(served.size).toBeGreaterThan(50);
    for (const [path, methods] of served) {
      const url = concretePath(path);
      const allow = allowOf(methods);
      for (const method of METHODS.filter((each) => !methods.includes(each))) {
        const reply = await test.call({ method: method as 'GET', url });
        const problem = reply.json as { type?: string; allowed_methods?: string[] } | undefined;
        if (
          reply.status !== 405 ||
          reply.headers.allow !== allow ||
          (method !== 'HEAD' &&
            (problem?.type !== '/problems/method-not-allowed' || problem.allowed_methods?.join(', ') !== allow))
        )
          wrong.push(
            `${method} ${url}: ${reply.status} Allow ${String(reply.headers.allow)} (expected 405 Allow ${allow})`,
          );
      }
      const options = await test.call({ method: 'OPTIONS', url });
      if (options.status !== 204 || options.headers.allow !== allow)
        wrong.push(
          `OPTIONS ${url}: ${options.status} Allow ${String(options.headers.allow)} (expected 204 Allow ${allow})`,
        );
    }
    expect(wrong).toEqual([]);
  });

  it.each([
    ['GET', '/v1/users/batch', 'POST, OPTIONS'],
    ['HEAD', '/v1/items/batch', 'POST, OPTIONS'],
    ['PATCH', '/v1/users/me', 'GET, HEAD, OPTIONS'],
    ['PATCH', '/v1/callers/me', 'GET, HEAD, OPTIONS'],
    ['DELETE', '/v1/callers/me', 'GET, HEAD, OPTIONS'],
    ['DELETE', '/v1/users/import', 'POST, OPTIONS'],
    ['PUT', '/v1/items/stock', 'GET, HEAD, OPTIONS'],
    ['GET', '/v1/items/stock/batch', 'POST, OPTIONS'],
  ])('%s %s: 405 method-not-allowed with Allow: %s, before credentials are asked for', async (method, url, allow) => {
    const reply = await test.call({ method: method as 'GET', url, key: null });
    expect(reply.status).toBe(405);
    expect(reply.headers.allow).toBe(allow);
    if (method !== 'HEAD')
      expect(expectProblem(reply, 405, 'method-not-allowed').allowed_methods).toEqual(allow.split(', '));
  });

  it('PUT /v1/users/batch: 405 and nothing stored when a body that would be a valid user is sent', async () => {
    const before = await storedUsers(test);
    const reply = await test.call({ method: 'PUT', url: '/v1/users/batch', body: buildUser() });
    expectProblem(reply, 405, 'method-not-allowed');
    expect(reply.headers.allow).toBe('POST, OPTIONS');
    expect(await storedUsers(test)).toEqual(before);
  });

  it.each([
    ['/v1/users/import', 'POST, OPTIONS'],
    ['/v1/users/batch', 'POST, OPTIONS'],
    ['/v1/items/stock', 'GET, HEAD, OPTIONS'],
    ['/v1/users/7', 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS'],
  ])('OPTIONS %s: 204 with Allow: %s', async (url, allow) => {
    const reply = await test.call({ method: 'OPTIONS', url });
    expect(reply.status).toBe(204);
    expect(reply.headers.allow).toBe(allow);
  });
});
