import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

describe('POST /v1/users', () => {
  it('POST /v1/users: 201 with Location, ETag and the stored user when the body is valid', async () => {
    const body = buildUser({ name: 'Ada Lovelace' });
    const reply = await test.call({ method: 'POST', url: '/v1/users', body });

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toEqual({
      id: expect.any(Number),
      name: 'Ada Lovelace',
      email: body.email,
      created_by: 1,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(reply.headers.location).toBe(`/v1/users/${reply.json.id}`);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const stored = await test.storage.db
      .selectFrom('users')
      .selectAll()
      .where('id', '=', reply.json.id)
      .executeTakeFirstOrThrow();
    expect(stored).toMatchObject({
      name: 'Ada Lovelace',
      email: body.email,
      email_key: body.email.toLowerCase(),
      version: 1,
    });
  });

  it('POST /v1/users: 409 email-taken when the email differs only in case, and nothing is stored', async () => {
    const { user } = await createUser(test, { email: 'Grace.Hopper@Example.com' });
    const before = await storedUsers(test);

    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      body: buildUser({ email: 'grace.hopper@example.COM' }),
    });

    const problem = expectProblem(reply, 409, 'email-taken');
    expect(problem.detail).toContain('grace.hopper@example.com');
    expect(await storedUsers(test)).toEqual(before);
    expect(before.some((row) => row.id === user.id)).toBe(true);
  });

  it('POST /v1/users: 201 when the body is XML, answered in XML when Accept asks for it', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
      body: '<?xml version="1.0"?><user><name>Alan &amp; Co &lt;Turing&gt;</name><email>alan.xml@example.com</email></user>',
    });

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.headers.etag).toBe('"v1-xml"');
    expect(reply.text).toMatch(
      /^<\?xml version="1.0" encoding="UTF-8"\?>\n<user><id>\d+<\/id><name>Alan &amp; Co &lt;Turing&gt;<\/name><email>alan.xml@example.com<\/email><created_by>1<\/created_by><created_at>/,
    );
    const id = Number(/<id>(\d+)<\/id>/.exec(reply.text)![1]);
    const read = await test.call({ url: `/v1/users/${id}` });
    expect(read.json.name).toBe('Alan & Co <Turing>');
  });

  it('POST /v1/users: 415 when the media type is one the operation does not take (merge-patch is for PATCH)', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify(buildUser()),
    });
    const problem = expectProblem(reply, 415, 'unsupported-media-type');
    expect(problem.accepted_media_types).toEqual(['application/json', 'application/xml']);
    expect(reply.headers.accept).toBe('application/json, application/xml');
  });

  it('POST /v1/users: 415 when the charset is not UTF-8', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { 'content-type': 'application/json; charset=iso-8859-1' },
      body: JSON.stringify(buildUser()),
    });
    expectProblem(reply, 415, 'unsupported-media-type');
  });
});

describe('GET /v1/users/{id}', () => {
  it('GET /v1/users/{id}: 200 with the user and a strong ETag', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({ url: `/v1/users/${user.id}` });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual(user);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.headers.vary).toBe('Accept');
  });

  it('GET /v1/users/{id}: 304 without a body when If-None-Match holds the current ETag', async () => {
    const { user, etag } = await createUser(test);
    const reply = await test.call({ url: `/v1/users/${user.id}`, headers: { 'if-none-match': `W/"x", ${etag}` } });
    expect(reply.status).toBe(304);
    expect(reply.text).toBe('');
    expect(reply.headers.etag).toBe(etag);
  });

  it('GET /v1/users/{id}: 200 when If-None-Match holds a stale ETag', async () => {
    const { user } = await createUser(test);
    await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Renamed' } });
    const reply = await test.call({ url: `/v1/users/${user.id}`, headers: { 'if-none-match': '"v1"' } });
    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
  });

  it('GET /v1/users/{id}: the XML representation has its own ETag, and If-None-Match compares per representation', async () => {
    const { user } = await createUser(test);
    const xml = await test.call({ url: `/v1/users/${user.id}`, headers: { accept: 'application/xml' } });
    expect(xml.headers.etag).toBe('"v1-xml"');
    const cached = await test.call({
      url: `/v1/users/${user.id}`,
      headers: { accept: 'application/xml', 'if-none-match': '"v1-xml"' },
    });
    expect(cached.status).toBe(304);
    const otherRepresentation = await test.call({
      url: `/v1/users/${user.id}`,
      headers: { 'if-none-match': '"v1-xml"' },
    });
    expect(otherRepresentation.status).toBe(200);
  });

  it('HEAD /v1/users/{id}: 200 with the headers of GET and no body', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({ method: 'HEAD', url: `/v1/users/${user.id}` });
    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.text).toBe('');
  });

  it.each([
    ['a non-numeric id', 'abc'],
    ['a negative id', '-1'],
    ['zero', '0'],
    ['a huge id', '99999999999999999999999'],
    ['an id past the safe integer range', '9007199254740993'],
    ['a fraction', '1.5'],
    ['a leading zero', '01'],
    ['an exponent', '1e3'],
    ['hexadecimal', '0x1'],
    ['an id that names no user', '987654'],
  ])('GET /v1/users/{id}: 404 not-found when the id is %s', async (_case, id) => {
    const reply = await test.call({ url: `/v1/users/${id}` });
    const problem = expectProblem(reply, 404, 'not-found');
    expect(problem.instance).toBe(`/v1/users/${id}`);
  });
});

describe('PUT /v1/users/{id}', () => {
  it('PUT /v1/users/{id}: 200 with the replaced user, a new version and updated_at', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      body: { name: 'New Name', email: 'new.name@example.com' },
    });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      id: user.id,
      name: 'New Name',
      email: 'new.name@example.com',
      created_at: user.created_at,
    });
    expect(reply.json.updated_at >= user.updated_at).toBe(true);
    expect(reply.headers.etag).toBe('"v2"');
  });

  it('PUT /v1/users/{id}: 422 with a pointer when a writable field is missing, and nothing changes', async () => {
    const { user } = await createUser(test);
    const before = await storedUsers(test);
    const reply = await test.call({ method: 'PUT', url: `/v1/users/${user.id}`, body: { name: 'Only Name' } });
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors).toEqual([{ in: 'body', pointer: '#/email', detail: 'is required' }]);
    expect(await storedUsers(test)).toEqual(before);
  });

  it('PUT /v1/users/{id}: 200 when read-only fields echo the stored values (timestamps compared as instants)', async () => {
    const { user } = await createUser(test);
    const echoedCreatedAt = user.created_at.replace(/\.\d{3}Z$/, (fraction) =>
      fraction === '.000Z' ? 'Z' : fraction.replace('Z', '+00:00'),
    );
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      body: { ...user, created_at: echoedCreatedAt, name: 'Echo' },
    });
    expect(reply.status).toBe(200);
    expect(reply.json.name).toBe('Echo');
  });

  it('PUT /v1/users/{id}: 422 read-only-field when id or created_at differ from the stored values, and nothing changes', async () => {
    const { user } = await createUser(test);
    const before = await storedUsers(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      body: { ...user, id: user.id + 1000, created_at: '2000-01-01T00:00:00Z' },
    });
    const problem = expectProblem(reply, 422, 'read-only-field');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/id', '#/created_at']);
    expect(await storedUsers(test)).toEqual(before);
  });

  it('PUT /v1/users/{id}: the version stays when nothing changes, so ETags held by clients stay valid', async () => {
    const { user, etag } = await createUser(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': etag },
      body: { name: user.name, email: user.email },
    });
    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(etag);
    expect(reply.json.updated_at).toBe(user.updated_at);
  });

  it('PUT /v1/users/{id}: 412 when If-Match is stale, and nothing changes', async () => {
    const { user, etag } = await createUser(test);
    await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Changed By Someone Else' } });
    const before = await storedUsers(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': etag },
      body: { name: 'Mine', email: user.email },
    });
    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedUsers(test)).toEqual(before);
  });

  it('PUT /v1/users/{id}: 200 when If-Match holds the current ETag of either representation', async () => {
    const { user } = await createUser(test);
    const json = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': '"v1"' },
      body: { name: 'A', email: user.email },
    });
    expect(json.status).toBe(200);
    const xml = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': '"v2-xml"' },
      body: { name: 'B', email: user.email },
    });
    expect(xml.status).toBe(200);
    expect(xml.headers.etag).toBe('"v3"');
  });

  it('PUT /v1/users/{id}: 412 when If-Match holds a weak tag (strong comparison)', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': 'W/"v1"' },
      body: { name: 'A', email: user.email },
    });
    expectProblem(reply, 412, 'precondition-failed');
  });

  it('PUT /v1/users/{id}: 404 (not 412) when the user does not exist, whatever If-Match says', async () => {
    const reply = await test.call({
      method: 'PUT',
      url: '/v1/users/424242',
      headers: { 'if-match': '"v1"' },
      body: buildUser(),
    });
    expectProblem(reply, 404, 'not-found');
  });

  it('PUT /v1/users/{id}: 409 when the new email belongs to another user, and nothing changes', async () => {
    const { user: first } = await createUser(test);
    const { user: second } = await createUser(test);
    const before = await storedUsers(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${second.id}`,
      body: { name: second.name, email: first.email.toUpperCase() },
    });
    expectProblem(reply, 409, 'email-taken');
    expect(await storedUsers(test)).toEqual(before);
  });

  it('PUT /v1/users/{id}: a user may change the case of their own email', async () => {
    const { user } = await createUser(test, { email: 'case.change@example.com' });
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      body: { name: user.name, email: 'Case.Change@Example.com' },
    });
    expect(reply.status).toBe(200);
    expect(reply.json.email).toBe('Case.Change@Example.com');
  });
});

describe('PATCH /v1/users/{id}', () => {
  it('PATCH /v1/users/{id}: changes only the members present (application/merge-patch+json)', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ name: 'Patched' }),
    });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ id: user.id, name: 'Patched', email: user.email });
    expect(reply.headers.etag).toBe('"v2"');
  });

  it('PATCH /v1/users/{id}: accepts plain JSON and XML bodies too', async () => {
    const { user } = await createUser(test);
    const json = await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Via JSON' } });
    expect(json.json.name).toBe('Via JSON');
    const xml = await test.call({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { 'content-type': 'application/xml' },
      body: '<user><name>Via XML</name></user>',
    });
    expect(xml.status).toBe(200);
    expect(xml.json.name).toBe('Via XML');
  });

  it('PATCH /v1/users/{id}: 422 when a member is null (it would remove a required field), and nothing changes', async () => {
    const { user } = await createUser(test);
    const before = await storedUsers(test);
    const reply = await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: null } });
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors).toEqual([{ in: 'body', pointer: '#/name', detail: 'must be a string' }]);
    expect(await storedUsers(test)).toEqual(before);
  });

  it('PATCH /v1/users/{id}: 412 when If-Match is stale', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': '"v7"' },
      body: { name: 'X' },
    });
    expectProblem(reply, 412, 'precondition-failed');
  });
});

describe('DELETE /v1/users/{id}', () => {
  it('DELETE /v1/users/{id}: 204, then the user is gone (404) and its id is never reused', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` });
    expect(reply.status).toBe(204);
    expect(reply.text).toBe('');
    expectProblem(await test.call({ url: `/v1/users/${user.id}` }), 404, 'not-found');
    const { user: next } = await createUser(test);
    expect(next.id).toBeGreaterThan(user.id);
  });

  it('DELETE /v1/users/{id}: 412 when If-Match is stale, and the user stays', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({ method: 'DELETE', url: `/v1/users/${user.id}`, headers: { 'if-match': '"v9"' } });
    expectProblem(reply, 412, 'precondition-failed');
    expect((await test.call({ url: `/v1/users/${user.id}` })).status).toBe(200);
  });

  it('DELETE /v1/users/{id}: 204 when If-Match holds the current ETag', async () => {
    const { user, etag } = await createUser(test);
    const reply = await test.call({ method: 'DELETE', url: `/v1/users/${user.id}`, headers: { 'if-match': etag } });
    expect(reply.status).toBe(204);
  });

  it('DELETE /v1/users/{id}: 404 when the user does not exist', async () => {
    expectProblem(await test.call({ method: 'DELETE', url: '/v1/users/555555' }), 404, 'not-found');
  });
});
