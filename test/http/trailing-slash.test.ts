import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';

/** A path with a trailing slash (docs/conventions.md): redirected to the one URL of its resource. */
let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

describe('trailing slashes', () => {
  it.each([
    ['/v1/', '/v1'],
    ['/docs/', '/docs'],
    ['/v1/users/?limit=1', '/v1/users?limit=1'],
    ['/v1/openapi.json/', '/v1/openapi.json'],
    ['/health/live/', '/health/live'],
  ])('GET %s: 308 to %s, which answers', async (path, location) => {
    const reply = await test.call({ url: path });
    expect(reply.status).toBe(308);
    expect(reply.headers.location).toBe(location);
    expect(reply.text).toBe('');
    expect((await test.call({ url: location })).status).toBe(200);
  });

  it('POST /v1/users/: 308 to /v1/users (a redirect that keeps the method and the body), and nothing is created', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users/',
      body: { name: 'Slash', email: 'slash@example.com' },
    });
    expect(reply.status).toBe(308);
    expect(reply.headers.location).toBe('/v1/users');
    expect((await test.call({ url: '/v1/users?email=slash@example.com' })).json.data).toEqual([]);
  });

  it.each(['/v1/nothing/', '//example.com/', '/nothing//'])(
    'GET %s: 404 when the path without its slash names nothing either (never a redirect to another origin)',
    async (path) => {
      const reply = await test.call({ url: path });
      expectProblem(reply, 404, 'not-found');
      expect(reply.headers.location).toBeUndefined();
    },
  );
});
