import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';

/**
 * What the fuzzing of the OpenAPI document (test/fuzz) found, each kept as a test of its own:
 * answers the document did not list, and refusals that were not RFC 9457 problems.
 */
let test: TestApp;
let document: {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>;
};
beforeAll(async () => {
  test = await startApp();
  document = test.app.swagger() as unknown as typeof document;
});
afterAll(() => test.close());

const documented = (path: string, method: string) => Object.keys(document.paths[path]![method]!.responses);

describe('refusals the document now lists', () => {
  it('GET / and GET /health/live: 400 malformed-credentials for credentials in the query string, and every operation of the document lists 400', async () => {
    expectProblem(await test.call({ url: '/?api_key=x', key: null }), 400, 'malformed-credentials');
    expectProblem(await test.call({ url: '/health/live?access_token=x', key: null }), 400, 'malformed-credentials');
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods))
        expect(Object.keys(operation.responses), `${method} ${path}`).toContain('400');
    }
  });

  it('GET /v1/limits: 401 invalid-credentials with a wrong key, as documented', async () => {
    expectProblem(await test.call({ url: '/v1/limits', key: 'rowi_aaaaaaaa_not-a-key' }), 401, 'invalid-credentials');
    expect(documented('/v1/limits', 'get')).toContain('401');
  });

  it('DELETE /v1/users/{id}: 409 user-has-open-orders while the user has a placed order, as documented', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 1);
    await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'open', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    expectProblem(await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` }), 409, 'user-has-open-orders');
    expect(documented('/v1/users/{id}', 'delete')).toContain('409');
  });

  it("DELETE /v1/callers/{id}/keys/{key_id}: 409 last-admin for the last admin's last key, as documented", async () => {
    expectProblem(await test.call({ method: 'DELETE', url: '/v1/callers/1/keys/1' }), 409, 'last-admin');
    expect(documented('/v1/callers/{id}/keys/{key_id}', 'delete')).toContain('409');
  });

  it('POST /oauth/token: a NUL in the query string is a 400 problem, which the document lists beside the RFC 6749 error', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/oauth/token?x=%00',
      key: null,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    expectProblem(reply, 400, 'invalid-query');
    expect(Object.keys(document.paths['/oauth/token']!.post!.responses['400']!.content!)).toEqual([
      'application/json',
      'application/problem+json',
    ]);
  });
});

describe('refusals before any route, as problems', () => {
  it("GET /v1/callers/1/keys/%: 400 bad-request problem with the request id (it was Fastify's own plain JSON)", async () => {
    const reply = await test.call({ url: '/v1/callers/1/keys/%' });
    const problem = expectProblem(reply, 400, 'bad-request');
    expect(problem.detail).toMatch(/not validly percent-encoded/);
    expect(problem.instance).toBe('/v1/callers/1/keys/%25');
  });

  it('GET /v1/users/%: 400 as an XML problem when Accept asks for XML', async () => {
    const reply = await test.call({ url: '/v1/users/%zz', headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(400);
    expect(reply.mediaType).toBe('application/problem+xml');
    expect(reply.text).toContain('<type>/problems/bad-request</type>');
  });

  it("GET /v1/weather/{place}: 404 not-found problem for a place of 300 characters (it was Fastify's 414 in plain JSON)", async () => {
    const reply = await test.call({ url: `/v1/weather/${'a'.repeat(300)}` });
    expectProblem(reply, 404, 'not-found');
  });

  it('GET /v1/users/[]: 404 whose instance is a URI reference (RFC 9457): characters a URI cannot hold are percent-encoded', async () => {
    const problem = expectProblem(await test.call({ url: '/v1/users/[]' }), 404, 'not-found');
    expect(problem.instance).toBe('/v1/users/%5B%5D');
  });
});
