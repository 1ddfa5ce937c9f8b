import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { dereferenced } from '../helpers/openapi.js';
import { expectProblem } from '../helpers/problems.js';

/**
 * An XML body is read only as what it says it is: its root element is the one the operation takes
 * (the document's xml.name), its values are elements (an attribute other than nil="true" or a
 * namespace is refused, not dropped), and it is UTF-8 XML 1.0 (another declared encoding or
 * version is refused, not ignored). Nothing is stored from a refused body.
 */
let test: TestApp;
let xmlOperations: { method: 'POST' | 'PUT' | 'PATCH'; path: string; root: string | undefined }[];

beforeAll(async () => {
  test = await startApp();
  const document = dereferenced(test.app.swagger()) as {
    paths: Record<
      string,
      Record<string, { requestBody?: { content: Record<string, { schema: { xml?: { name?: string } } }> } }>
    >;
  };
  xmlOperations = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([, operation]) => operation.requestBody?.content['application/xml'] !== undefined)
      .map(([method, operation]) => ({
        method: method.toUpperCase() as 'POST',
        path,
        root: operation.requestBody!.content['application/xml']!.schema.xml?.name,
      })),
  );
});
afterAll(() => test.close());

const XML = { 'content-type': 'application/xml' };
const usersStored = async () => (await test.call({ url: '/v1/users?limit=500' })).json.data.length as number;

describe('XML bodies', () => {
  it('every operation that takes XML names its root element in the OpenAPI document', () => {
    expect(xmlOperations.length).toBeGreaterThan(10);
    expect(
      xmlOperations
        .filter((operation) => operation.root === undefined)
        .map((operation) => `${operation.method} ${operation.path}`),
    ).toEqual([]);
  });

  it("every operation that takes XML: 422 naming the root when the body's root element is another one", async () => {
    for (const operation of xmlOperations) {
      const other = operation.root === 'user' ? 'item' : 'user';
      const url = operation.path.replace('{id}', '1').replace('{place}', 'xml-place');
      const problem = expectProblem(
        await test.call({ method: operation.method, url, headers: XML, body: `<${other}><name>x</name></${other}>` }),
        422,
        'validation-failed',
      );
      expect(problem.errors, `${operation.method} ${operation.path}`).toEqual([
        { in: 'body', pointer: '#', detail: `is an element <${other}>; the root element must be <${operation.root!}>` },
      ]);
    }
  });

  it("POST /v1/users: 422 and nothing stored when a user's fields come in an <item>", async () => {
    const before = await usersStored();
    expectProblem(
      await test.call({
        method: 'POST',
        url: '/v1/users',
        headers: XML,
        body: '<item><name>Ada</name><email>item-root@example.com</email></item>',
      }),
      422,
      'validation-failed',
    );
    expect(await usersStored()).toBe(before);
  });

  it.each([
    [
      'an id attribute',
      '<user id="99"><name>Ada</name><email>attr1@example.com</email></user>',
      /attribute id on <user>/,
    ],
    [
      'an attribute on a field',
      '<user><name lang="en">Ada</name><email>attr2@example.com</email></user>',
      /attribute lang on <name>/,
    ],
    [
      'a declared encoding other than UTF-8',
      '<?xml version="1.0" encoding="ISO-8859-1"?><user><name>Ada</name><email>latin1@example.com</email></user>',
      /encoding ISO-8859-1/,
    ],
  ])(
    'POST /v1/users: 400 malformed-body naming it, nothing stored, when the XML has %s',
    async (_case, body, detail) => {
      const before = await usersStored();
      expect(
        expectProblem(await test.call({ method: 'POST', url: '/v1/users', headers: XML, body }), 400, 'malformed-body')
          .detail,
      ).toMatch(detail);
      expect(await usersStored()).toBe(before);
    },
  );

  it('POST /v1/orders: 422 naming the list when its items are not <line> elements', async () => {
    const body =
      '<order><name>x</name><user_id>1</user_id><lines><item><item_id>1</item_id><quantity>1</quantity></item></lines></order>';
    expect(
      expectProblem(
        await test.call({ method: 'POST', url: '/v1/orders', headers: XML, body }),
        422,
        'validation-failed',
      ).errors![0]!.pointer,
    ).toBe('#/lines');
  });

  it('POST /v1/users: 201 with a UTF-8 declaration, a namespace and nil="true" where null is allowed', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: XML,
      body: '<?xml version="1.0" encoding="UTF-8"?><user xmlns="urn:example"><name>Ada</name><email>utf8@example.com</email></user>',
    });
    expect(reply.status, reply.text).toBe(201);
    const patched = await test.call({
      method: 'PATCH',
      url: '/v1/weather/xml-nil',
      headers: XML,
      body: '<weather><name>Nil</name><latitude nil="true"/><longitude nil="true"/></weather>',
    });
    expect(patched.status, patched.text).toBeLessThan(300);
  });
});
