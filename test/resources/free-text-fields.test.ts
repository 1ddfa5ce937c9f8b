import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { dereferenced } from '../helpers/openapi.js';
import { expectProblem } from '../helpers/problems.js';
import { buildItem, buildUser, createItem, createUser, setStock } from '../helpers/records.js';
import { REFUSED_CHARACTERS } from '../helpers/text-cases.js';
import { buildObservation } from '../helpers/weather.js';

/**
 * Every free-text field a caller stores refuses control, invisible and bidirectional-control
 * characters and line and paragraph separators, and a name must show something: 422 naming the
 * field, nothing stored. The rule is the document's (a pattern on each field), so a new field
 * without it fails the last test here.
 */
let test: TestApp;
let userId: number;
let itemId: number;
let callerId: number;

beforeAll(async () => {
  test = await startApp();
  userId = (await createUser(test)).user.id;
  itemId = (await createItem(test)).item.id;
  await setStock(test, itemId, 100);
  callerId = (await test.call({ method: 'POST', url: '/v1/callers', body: { name: 'free-text-feed', role: 'editor' } }))
    .json.id;
});
afterAll(() => test.close());

/** Each stored free-text field: how to send a value in it, and how to read the stored value back. */
const FIELDS: {
  field: string;
  send: (value: string) => { method: 'POST' | 'PUT' | 'PATCH'; url: string; body: Record<string, unknown> };
  stored: () => Promise<unknown[]>;
}[] = [
  {
    field: 'POST /v1/users name',
    send: (name) => ({ method: 'POST', url: '/v1/users', body: buildUser({ name }) }),
    stored: async () =>
      (await test.call({ url: '/v1/users?limit=500' })).json.data.map((user: { name: string }) => user.name),
  },
  {
    field: 'PATCH /v1/users/{id} name',
    send: (name) => ({ method: 'PATCH', url: `/v1/users/${userId}`, body: { name } }),
    stored: async () => [(await test.call({ url: `/v1/users/${userId}` })).json.name],
  },
  {
    field: 'POST /v1/items name',
    send: (name) => ({ method: 'POST', url: '/v1/items', body: buildItem({ name }) }),
    stored: async () =>
      (await test.call({ url: '/v1/items?limit=500' })).json.data.map((item: { name: string }) => item.name),
  },
  {
    field: 'PUT /v1/items/{id} name',
    send: (name) => ({
      method: 'PUT',
      url: `/v1/items/${itemId}`,
      body: { ...buildItem({ name }), sku: `FT-${itemId}` },
    }),
    stored: async () => [(await test.call({ url: `/v1/items/${itemId}` })).json.name],
  },
  {
    field: 'POST /v1/orders name',
    send: (name) => ({
      method: 'POST',
      url: '/v1/orders',
      body: { name, user_id: userId, lines: [{ item_id: itemId, quantity: 1 }] },
    }),
    stored: async () =>
      (await test.call({ url: '/v1/orders?limit=500' })).json.data.map((order: { name: string }) => order.name),
  },
  {
    field: 'PUT /v1/weather/{place} name',
    send: (name) => ({ method: 'PUT', url: '/v1/weather/free-text-a', body: buildObservation({ name }) }),
    stored: async () =>
      (await test.call({ url: '/v1/weather?limit=500' })).json.data.map((place: { name: string }) => place.name),
  },
  {
    field: 'PUT /v1/weather/{place} source',
    send: (source) => ({ method: 'PUT', url: '/v1/weather/free-text-b', body: buildObservation({ source }) }),
    stored: async () =>
      (await test.call({ url: '/v1/weather?limit=500' })).json.data.map((place: { source: string }) => place.source),
  },
  {
    field: 'PATCH /v1/weather/{place} name',
    send: (name) => ({ method: 'PATCH', url: '/v1/weather/free-text-c', body: { name } }),
    stored: async () =>
      (await test.call({ url: '/v1/weather?limit=500' })).json.data.map((place: { name: string }) => place.name),
  },
  {
    field: 'POST /v1/callers/{id}/keys description',
    send: (description) => ({ method: 'POST', url: `/v1/callers/${callerId}/keys`, body: { description } }),
    stored: async () =>
      (await test.call({ url: `/v1/callers/${callerId}/keys` })).json.data.map(
        (key: { description: string }) => key.description,
      ),
  },
];

const pointerOf = (field: string) => `#/${field.split(' ').at(-1)!}`;

/** Characters that reach validation in a JSON body (NUL is refused earlier, as 400 malformed-body, in any text). */
const REFUSED = REFUSED_CHARACTERS.filter(([, character]) => character !== '\u0000');

describe('free text', () => {
  it.each(
    FIELDS.flatMap((field) => REFUSED.map(([what, character]) => [field.field, what, field, character] as const)),
  )('%s: 422 validation-failed naming the field when it holds %s', async (_field, _what, field, character) => {
    const value = `Ada${character}Lovelace`;
    const request = field.send(value);
    const problem = expectProblem(await test.call(request), 422, 'validation-failed');
    expect(problem.errors).toEqual([
      expect.objectContaining({
        in: 'body',
        pointer: pointerOf(field.field),
        detail: expect.stringMatching(/bidirectional/),
      }),
    ]);
    expect(await field.stored()).not.toContain(value);
  });

  it.each(FIELDS.filter((field) => !field.field.endsWith('description')).map((field) => [field.field, field] as const))(
    '%s: 422 when it holds only a zero-width space (no visible character)',
    async (_field, field) => {
      const problem = expectProblem(await test.call(field.send('\u200b')), 422, 'validation-failed');
      expect(problem.errors![0]!.pointer).toBe(pointerOf(field.field));
    },
  );

  it('POST /v1/users: 422 for a right-to-left override sent in XML as a character reference', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { 'content-type': 'application/xml' },
      body: '<user><name>Ada&#x202E;fdp.exe</name><email>rlo@example.com</email></user>',
    });
    expect(expectProblem(reply, 422, 'validation-failed').errors![0]!.pointer).toBe('#/name');
  });

  it.each(FIELDS.map((field) => [field.field, field] as const))(
    '%s: takes a name in any script, with emoji joiners and selectors',
    async (_field, field) => {
      const value = `می\u200cخواهم 👨\u200d👩\u200d👧 \u2764\ufe0f 名前 Ünïcödé`;
      const reply = await test.call(field.send(value));
      expect(reply.status, reply.text).toBeLessThan(300);
      expect(await field.stored()).toContain(value);
    },
  );

  it('every string a request body stores carries the free-text rule, or a stricter pattern, in the OpenAPI document', () => {
    const document = dereferenced(test.app.swagger()) as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: Record<string, unknown> }> } }>
      >;
    };
    /**
     * Strings that are not stored as sent: an order's status is compared with the statuses (in a
     * batch entry too), the
     * OAuth form's fields with the credentials and the user (its user_id is read as a number, and
     * anything else refused with invalid_request).
     */
    const notFreeText = new Set([
      'PATCH /v1/orders/{id} status',
      'POST /v1/orders/batch change status',
      'POST /oauth/token grant_type',
      'POST /oauth/token scope',
      'POST /oauth/token client_id',
      'POST /oauth/token client_secret',
      'POST /oauth/token user_id',
    ]);
    const lenient: string[] = [];
    const visit = (where: string, schema: Record<string, unknown> | undefined): void => {
      if (schema === undefined || schema.readOnly === true) return;
      for (const branch of (schema.anyOf ?? []) as Record<string, unknown>[]) visit(where, branch);
      for (const [name, member] of Object.entries((schema.properties ?? {}) as Record<string, Record<string, unknown>>))
        visit(`${where} ${name}`, member);
      visit(where, schema.items as Record<string, unknown> | undefined);
      if (schema.type !== 'string' || 'enum' in schema || 'const' in schema || schema.format !== undefined) return;
      const pattern = typeof schema.pattern === 'string' ? new RegExp(schema.pattern, 'u') : undefined;
      const refusesEveryCharacter =
        pattern !== undefined && REFUSED.every(([, character]) => !pattern.test(`Ada${character}`));
      if (!refusesEveryCharacter && !notFreeText.has(where)) lenient.push(where);
    };
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const content of Object.values(operation.requestBody?.content ?? {}))
          visit(`${method.toUpperCase()} ${path}`, content.schema);
      }
    }
    expect([...new Set(lenient)]).toEqual([]);
  });
});
