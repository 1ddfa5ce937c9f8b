import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
  await createUser(test, { name: 'Existing', email: 'existing@example.com' });
});
afterAll(() => test.close());

/** Acts, then checks that no stored user row changed. */
async function unchanged<T>(act: () => Promise<T>): Promise<T> {
  const before = await storedUsers(test);
  const result = await act();
  expect(await storedUsers(test)).toEqual(before);
  return result;
}

const nested = (depth: number) => `{"name":${'['.repeat(depth)}${']'.repeat(depth)},"email":"deep@example.com"}`;
const BILLION_LAUGHS = `<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<user><name>&lol3;</name><email>laughs@example.com</email></user>`;
const XXE = `<?xml version="1.0"?><!DOCTYPE user [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><user><name>&xxe;</name><email>xxe@example.com</email></user>`;

describe('bad request bodies change nothing stored', () => {
  it.each([
    ['malformed JSON', 'application/json', '{"name": "x",', 400, 'malformed-body'],
    ['JSON with a trailing comma', 'application/json', '{"name":"x","email":"x@example.com",}', 400, 'malformed-body'],
    ['an empty JSON body', 'application/json', '', 400, 'malformed-body'],
    ['JSON nested 10,000 deep', 'application/json', nested(10_000), 400, 'body-too-deep'],
    [
      'JSON with __proto__ (prototype poisoning)',
      'application/json',
      '{"name":"x","email":"p@example.com","__proto__":{"admin":true}}',
      400,
      'malformed-body',
    ],
    ['malformed XML', 'application/xml', '<user><name>x</name><email>x@example.com</user>', 400, 'malformed-body'],
    ['XML with two roots', 'application/xml', '<user><name>x</name></user><user/>', 400, 'malformed-body'],
    ['XML entity expansion ("billion laughs")', 'application/xml', BILLION_LAUGHS, 400, 'xml-doctype-refused'],
    ['XML external entity (XXE)', 'application/xml', XXE, 400, 'xml-doctype-refused'],
    [
      'XML nested 10,000 deep',
      'application/xml',
      `<user>${'<a>'.repeat(10_000)}${'</a>'.repeat(10_000)}</user>`,
      400,
      'body-too-deep',
    ],
    ['Content-Type text/plain', 'text/plain', 'name=x', 415, 'unsupported-media-type'],
    [
      'Content-Type application/x-www-form-urlencoded',
      'application/x-www-form-urlencoded',
      'name=x&email=y',
      415,
      'unsupported-media-type',
    ],
  ])(
    'POST /v1/users: the documented problem, and nothing stored, for %s',
    async (_case, contentType, body, status, type) => {
      const reply = await unchanged(() =>
        test.call({ method: 'POST', url: '/v1/users', headers: { 'content-type': contentType }, body }),
      );
      expectProblem(reply, status, type);
    },
  );

  it('POST /v1/users: the XXE body never reaches the file system (nothing of /etc/passwd in the answer)', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { 'content-type': 'application/xml' },
      body: XXE,
    });
    expect(reply.text).not.toContain('root:');
  });

  it('POST /v1/users: 413 body-too-large when the body is over the limit', async () => {
    const body = JSON.stringify(buildUser({ name: 'x'.repeat(1024 * 1024) }));
    const reply = await unchanged(() =>
      test.call({ method: 'POST', url: '/v1/users', headers: { 'content-type': 'application/json' }, body }),
    );
    const problem = expectProblem(reply, 413, 'body-too-large');
    expect(problem.limit_bytes).toBe(1024 * 1024);
  });

  it.each([
    ['an empty name', { name: '' }, '#/name', 'must not be empty'],
    [
      'a blank name',
      { name: '   ' },
      '#/name',
      'must contain a visible character, and no control, invisible (zero-width, byte order mark) or bidirectional-control characters, nor line or paragraph separators',
    ],
    ['a 201-character name', { name: 'n'.repeat(201) }, '#/name', 'must be at most 200 characters long'],
    ['a non-string name', { name: 42 }, '#/name', 'must be a string'],
    [
      'a name with a control character',
      { name: 'bell\u0007' },
      '#/name',
      'must contain a visible character, and no control, invisible (zero-width, byte order mark) or bidirectional-control characters, nor line or paragraph separators',
    ],
    ['an invalid email', { email: 'not-an-email' }, '#/email', 'must be a valid email address'],
    ['a non-string email', { email: ['a@example.com'] }, '#/email', 'must be a string'],
    ['an unknown field', { role: 'admin' }, '#/role', 'is not a known field'],
    ['a read-only id', { id: 7 }, '#/id', 'is not a known field'],
    ['a missing email', { email: undefined }, '#/email', 'is required'],
  ])('POST /v1/users: 422 with a pointer for %s, and nothing is stored', async (_case, change, pointer, detail) => {
    const reply = await unchanged(() => test.call({ method: 'POST', url: '/v1/users', body: buildUser(change) }));
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors).toEqual([{ in: 'body', pointer, detail }]);
  });

  it('POST /v1/users: 422 lists every violation at once', async () => {
    const reply = await unchanged(() =>
      test.call({ method: 'POST', url: '/v1/users', body: { name: '', email: 'x', extra: 1 } }),
    );
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer).sort()).toEqual(['#/email', '#/extra', '#/name']);
  });

  it('POST /v1/users: 422 "must be an object" when the JSON body is an array', async () => {
    const reply = await unchanged(() => test.call({ method: 'POST', url: '/v1/users', body: [buildUser()] }));
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors).toEqual([{ in: 'body', pointer: '#', detail: 'must be an object' }]);
  });

  it('POST /v1/users: 422 when an XML body breaks the schema, pointing into the mapped JSON', async () => {
    const reply = await unchanged(() =>
      test.call({
        method: 'POST',
        url: '/v1/users',
        headers: { 'content-type': 'application/xml' },
        body: '<user><name></name><email>x@example.com</email><admin>1</admin></user>',
      }),
    );
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer).sort()).toEqual(['#/admin', '#/name']);
  });

  it('POST /v1/users: 409 for each duplicate email, and exactly one user stored, under concurrent POSTs', async () => {
    const email = 'race@example.com';
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        test.call({ method: 'POST', url: '/v1/users', body: { name: `Racer ${index}`, email } }),
      ),
    );
    expect(replies.filter((reply) => reply.status === 201)).toHaveLength(1);
    for (const reply of replies.filter((reply) => reply.status !== 201)) expectProblem(reply, 409, 'email-taken');
    const stored = (await storedUsers(test)).filter((row) => row.email_key === email);
    expect(stored).toHaveLength(1);
  });
});

describe('content negotiation', () => {
  it('GET /v1/users: 406 not-acceptable, as a JSON problem, when Accept is image/png', async () => {
    const reply = await test.call({ url: '/v1/users', headers: { accept: 'image/png' } });
    const problem = expectProblem(reply, 406, 'not-acceptable');
    expect(problem.available_media_types).toEqual([
      'application/json',
      'application/xml',
      'text/csv',
      'application/x-ndjson',
    ]);
  });

  it('POST /v1/users: 406 before anything is stored when Accept allows nothing rowi produces', async () => {
    const reply = await unchanged(() =>
      test.call({ method: 'POST', url: '/v1/users', headers: { accept: 'text/html' }, body: buildUser() }),
    );
    expectProblem(reply, 406, 'not-acceptable');
  });

  it.each([
    ['application/xml', 'application/xml'],
    ['text/xml', 'application/xml'],
    ['application/json;q=0.5, application/xml', 'application/xml'],
    ['application/xml;q=0.4, application/json;q=0.9', 'application/json'],
    ['application/json;q=0, */*', 'application/xml'],
    ['application/*', 'application/json'],
    ['*/*', 'application/json'],
  ])('GET /v1: Accept %s is answered as %s', async (accept, mediaType) => {
    const reply = await test.call({ url: '/v1', headers: { accept } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe(mediaType);
  });

  it('GET /v1/users/{id}: a problem is XML (application/problem+xml, RFC 9457 namespace) when Accept asks for XML', async () => {
    const reply = await test.call({
      url: '/v1/users/99999',
      headers: { accept: 'application/xml', 'x-request-id': 'trace-xml-1' },
    });
    expect(reply.status).toBe(404);
    expect(reply.mediaType).toBe('application/problem+xml');
    expect(reply.text).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<problem xmlns="urn:ietf:rfc:7807"><type>/problems/not-found</type><title>Not found</title>' +
        '<status>404</status><detail>There is no user 99999.</detail><instance>/v1/users/99999</instance><request_id>trace-xml-1</request_id></problem>',
    );
  });

  it('POST /v1/users: validation errors in XML carry each error as an <i> element', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { accept: 'application/xml' },
      body: { name: 'x' },
    });
    expect(reply.status).toBe(422);
    expect(reply.mediaType).toBe('application/problem+xml');
    expect(reply.text).toContain(
      '<errors><i><in>body</in><pointer>#/email</pointer><detail>is required</detail></i></errors>',
    );
  });
});

describe('routing', () => {
  it.each(['/nope', '/v1/nope', '/v1/users/1/nope', '/v2/users'])('GET %s: 404 not-found problem', async (url) => {
    expectProblem(await test.call({ url }), 404, 'not-found');
  });

  it.each([
    ['DELETE', '/v1/users', 'GET, HEAD, POST, OPTIONS'],
    ['PUT', '/v1/users', 'GET, HEAD, POST, OPTIONS'],
    ['POST', '/v1/users/1', 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS'],
    ['POST', '/v1', 'GET, HEAD, OPTIONS'],
  ])('%s %s: 405 method-not-allowed with Allow: %s', async (method, url, allow) => {
    const reply = await unchanged(() => test.call({ method: method as 'POST', url, body: buildUser() }));
    const problem = expectProblem(reply, 405, 'method-not-allowed');
    expect(reply.headers.allow).toBe(allow);
    expect(problem.allowed_methods).toEqual(allow.split(', '));
  });

  it('OPTIONS /v1/users/{id}: 204 with Allow', async () => {
    const reply = await test.call({ method: 'OPTIONS', url: '/v1/users/1' });
    expect(reply.status).toBe(204);
    expect(reply.headers.allow).toBe('GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
  });

  it('GET /: 308 to /v1', async () => {
    const reply = await test.call({ url: '/' });
    expect(reply.status).toBe(308);
    expect(reply.headers.location).toBe('/v1');
  });

  it('GET /v1: the index links every collection and the OpenAPI document', async () => {
    const reply = await test.call({ url: '/v1' });
    expect(reply.json).toEqual({
      name: 'rowi',
      version: expect.any(String),
      links: {
        self: '/v1',
        openapi: '/v1/openapi.json',
        users: '/v1/users',
        items: '/v1/items',
        orders: '/v1/orders',
        weather: '/v1/weather',
        limits: '/v1/limits',
      },
    });
    expect(reply.headers.link).toBe('</v1/openapi.json>; rel="service-desc"; type="application/openapi+json"');
  });

  it('GET /problems/{type}: every problem type a response names is documented there', async () => {
    const problem = expectProblem(await test.call({ url: '/v1/users/0' }), 404, 'not-found');
    const documentation = await test.call({ url: problem.type });
    expect(documentation.status).toBe(200);
    expect(documentation.json).toMatchObject({ type: '/problems/not-found', status: 404, title: 'Not found' });
    expectProblem(await test.call({ url: '/problems/no-such-type' }), 404, 'not-found');
  });
});

describe('X-Request-Id', () => {
  it('keeps a sane X-Request-Id sent by the caller, on success and on error', async () => {
    const ok = await test.call({ url: '/v1', headers: { 'x-request-id': 'abc-123_DEF.456' } });
    expect(ok.headers['x-request-id']).toBe('abc-123_DEF.456');
    const failed = await test.call({ url: '/v1/nope', headers: { 'x-request-id': 'abc-123_DEF.456' } });
    expect(failed.headers['x-request-id']).toBe('abc-123_DEF.456');
    expect(failed.json.request_id).toBe('abc-123_DEF.456');
  });

  it.each([
    ['with spaces', 'two words'],
    ['too long', 'x'.repeat(129)],
    ['with a quote', 'a"b'],
    ['empty', ''],
  ])('replaces a caller X-Request-Id that is %s with a new UUID', async (_case, id) => {
    const reply = await test.call({ url: '/v1', headers: { 'x-request-id': id } });
    expect(reply.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });

  it('gives every request its own id when the caller sends none', async () => {
    const first = await test.call({ url: '/v1' });
    const second = await test.call({ url: '/v1' });
    expect(first.headers['x-request-id']).not.toBe(second.headers['x-request-id']);
  });
});
