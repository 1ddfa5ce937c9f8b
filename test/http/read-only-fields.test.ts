import { dereferenced } from '../helpers/openapi.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';
import { buildObservation } from '../helpers/weather.js';

/**
 * A body field that is not writable on an operation is a 422 naming the field, on every PUT and
 * PATCH. The read-only fields are found in the OpenAPI document, so a new one cannot be missed:
 * a request schema's `readOnly` members may be echoed only with the stored value (422
 * read-only-field otherwise), and a response's `readOnly` members that the request schema does
 * not take at all are unknown fields (422 validation-failed). Either way nothing stored changes.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

interface Schema {
  type?: string;
  const?: unknown;
  enum?: unknown[];
  readOnly?: boolean;
  properties?: Record<string, Schema>;
  anyOf?: Schema[];
}

interface Target {
  /** The concrete URL, and the record's URL to read back. */
  url: string;
  read: string;
  /** A body the operation accepts as it is. */
  body: Record<string, unknown>;
}

/** Every PUT and PATCH of the document, with a record to aim it at. */
async function targets(): Promise<Record<string, Target>> {
  const { user } = await createUser(test);
  const { item } = await createItem(test);
  await setStock(test, item.id, 10);
  const order = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: 'ro', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
  });
  await test.call({ method: 'PUT', url: '/v1/weather/read-only', body: buildObservation() });
  const endpoint = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: 'https://hooks.example.com/rowi' },
  });
  const users = { url: `/v1/users/${user.id}`, read: `/v1/users/${user.id}` };
  const items = { url: `/v1/items/${item.id}`, read: `/v1/items/${item.id}` };
  const stock = { url: `/v1/items/${item.id}/stock`, read: `/v1/items/${item.id}/stock` };
  const orders = { url: `/v1/orders/${order.json.id}`, read: `/v1/orders/${order.json.id}` };
  const weather = { url: '/v1/weather/read-only', read: '/v1/weather/read-only' };
  return {
    'PUT /v1/users/{id}': { ...users, body: { name: user.name, email: user.email } },
    'PATCH /v1/users/{id}': { ...users, body: {} },
    'PUT /v1/items/{id}': { ...items, body: { name: item.name, sku: item.sku, price: item.price } },
    'PATCH /v1/items/{id}': { ...items, body: {} },
    'PUT /v1/items/{id}/stock': { ...stock, body: { quantity: 10 } },
    'PATCH /v1/items/{id}/stock': { ...stock, body: {} },
    'PUT /v1/orders/{id}': {
      ...orders,
      body: { name: 'ro', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    },
    'PATCH /v1/orders/{id}': { ...orders, body: {} },
    'PATCH /v1/callers/{id}': { url: '/v1/callers/1', read: '/v1/callers/1', body: {} },
    'PUT /v1/weather/{place}': { ...weather, body: buildObservation() },
    'PATCH /v1/weather/{place}': { ...weather, body: {} },
    'PATCH /v1/webhook-endpoints/{id}': {
      url: `/v1/webhook-endpoints/${endpoint.json.id}`,
      read: `/v1/webhook-endpoints/${endpoint.json.id}`,
      body: {},
    },
  };
}

/** A value the field's schema allows (another word of a vocabulary) that is not the stored one. */
function differentFrom(stored: unknown, schema: Schema | undefined): unknown {
  // A word of a vocabulary: `const` in TypeBox, one-value `enum` once @fastify/swagger has written it.
  const words = schema?.anyOf?.flatMap((branch) => (branch.const !== undefined ? [branch.const] : (branch.enum ?? [])));
  if (words && words.length > 0) return words.find((word) => word !== stored);
  if (typeof stored === 'number') return stored + 1000;
  if (typeof stored === 'boolean') return !stored;
  if (Array.isArray(stored)) return stored.length > 0 ? [] : ['users:read'];
  if (typeof stored === 'string' && !Number.isNaN(Date.parse(stored))) return '2001-02-03T04:05:06.000Z';
  if (typeof stored === 'string' && /^\d+\.\d\d$/.test(stored)) return '12345.67';
  return 'something-else';
}

const readOnlyMembers = (schema: Schema | undefined) =>
  Object.entries(schema?.properties ?? {})
    .filter(([, member]) => member.readOnly === true || member.anyOf?.some((branch) => branch.readOnly === true))
    .map(([name]) => name);

describe('read-only fields on every PUT and PATCH', () => {
  it('every PUT and PATCH of the OpenAPI document: 422 naming the field, nothing stored changed, for each read-only field sent with another value than the stored one', async () => {
    const document = dereferenced(test.app.swagger()) as unknown as {
      paths: Record<
        string,
        Record<
          string,
          {
            requestBody?: { content: Record<string, { schema: Schema }> };
            responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
          }
        >
      >;
    };
    const aims = await targets();
    const checked: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const method of ['put', 'patch'] as const) {
        const operation = operations[method];
        if (operation?.requestBody === undefined) continue;
        const name = `${method.toUpperCase()} ${path}`;
        const target = aims[name];
        expect(target, `${name} has no target in this test: add one`).toBeDefined();
        const request = operation.requestBody.content['application/json']!.schema;
        const response = (operation.responses['200'] ?? operation.responses['201'])!.content!['application/json']!
          .schema;
        const echoed = readOnlyMembers(request);
        const unknown = readOnlyMembers(response).filter((field) => request.properties?.[field] === undefined);
        const stored = (await test.call({ url: target!.read })).json as Record<string, unknown>;
        for (const field of [...echoed, ...unknown]) {
          const value = differentFrom(stored[field], request.properties?.[field] ?? response.properties?.[field]);
          const reply = await test.call({
            method: method.toUpperCase() as 'PUT' | 'PATCH',
            url: target!.url,
            body: { ...target!.body, [field]: value },
          });
          const problem = expectProblem(reply, 422, echoed.includes(field) ? 'read-only-field' : 'validation-failed');
          expect(
            problem.errors?.map((error) => error.pointer),
            `${name} with ${field}: ${reply.text}`,
          ).toContain(`#/${field}`);
          expect((await test.call({ url: target!.read })).json, `${name} with ${field} changed the record`).toEqual(
            stored,
          );
          checked.push(`${name} ${field}`);
        }
      }
    }
    // The fields the contract names are among those found (the document cannot silently lose one).
    expect(checked).toEqual(
      expect.arrayContaining([
        'PUT /v1/users/{id} id',
        'PATCH /v1/users/{id} created_at',
        'PATCH /v1/items/{id} updated_at',
        'PUT /v1/items/{id}/stock reserved',
        'PATCH /v1/items/{id}/stock item_id',
        'PUT /v1/orders/{id} total',
        'PUT /v1/orders/{id} status',
        'PATCH /v1/callers/{id} scopes',
        'PUT /v1/weather/{place} place',
        'PATCH /v1/weather/{place} stale',
        'PATCH /v1/weather/{place} observed_at',
        'PATCH /v1/webhook-endpoints/{id} created_at',
        'PATCH /v1/webhook-endpoints/{id} failed_attempts',
      ]),
    );
  });

  it('PATCH /v1/callers/{id}: 200, nothing changed, when scopes is echoed as read, in another order', async () => {
    const stored = (await test.call({ url: '/v1/callers/1' })).json;
    const reply = await test.call({
      method: 'PATCH',
      url: '/v1/callers/1',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ scopes: [...stored.scopes].reverse() }),
    });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual(stored);
  });

  it('PUT /v1/orders/{id}: 422 naming the line member when a line echoes unit_price', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const order = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'lines', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/orders/${order.json.id}`,
      body: { name: 'lines', user_id: user.id, lines: [{ item_id: item.id, quantity: 1, unit_price: '0.01' }] },
    });
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/lines/0/unit_price']);
    expect((await test.call({ url: `/v1/orders/${order.json.id}` })).json).toEqual(order.json);
  });
});
