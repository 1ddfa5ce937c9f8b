import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPE_NAMES, EVENT_TYPES } from '../../src/outbox/event-types.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { startNotesApp } from '../helpers/notes.js';
import { dereferenced } from '../helpers/openapi.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A schema of the document as Ajv reads it: the document's own keywords (x-…, xml) left out. */
const plain = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(plain);
  if (typeof schema !== 'object' || schema === null) return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key]) => !key.startsWith('x-') && key !== 'xml' && key !== '$id' && key !== 'examples')
      .map(([key, value]) => [key, plain(value)]),
  );
};

/** Validates against the named schema of the app's OpenAPI document; answers the errors, or undefined. */
async function validatorOf(test: TestApp) {
  const document = dereferenced((await test.call({ url: '/v1/openapi.json' })).json as Json);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  return (name: string, value: unknown) => {
    const validate = ajv.compile(plain(document.components.schemas[name]) as object);
    return validate(value) ? undefined : `${name}: ${ajv.errorsText(validate.errors)}`;
  };
}

describe('GET /v1/event-types', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(() => test.close());

  it('GET /v1/event-types: 200 without credentials, every type of the catalogue in its order, each with an example Event of its type', async () => {
    const reply = await test.call({ url: '/v1/event-types', key: null });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    const entries = reply.json.data as Json[];
    expect(entries.map((entry) => entry.type)).toEqual([...EVENT_TYPE_NAMES]);
    const invalid = await validatorOf(test);
    for (const entry of entries) {
      expect(entry).toEqual({
        type: entry.type,
        resource: EVENT_TYPES[entry.type]!.resource,
        description: EVENT_TYPES[entry.type]!.description,
        example: expect.objectContaining({ type: entry.type }),
      });
      expect(invalid('Event', entry.example)).toBeUndefined();
    }
    expect(invalid('EventTypeCatalogue', reply.json)).toBeUndefined();
    expect(new Set(entries.map((entry) => entry.example.id)).size).toBe(entries.length);
  });

  it("GET /v1/event-types: the examples carry the records as GET answers them (the schemas' examples), and a deletion its id", async () => {
    const examples = new Map(
      ((await test.call({ url: '/v1/event-types' })).json.data as Json[]).map((entry) => [entry.type, entry.example]),
    );
    const invalid = await validatorOf(test);
    for (const [type, schema] of [
      ['user.created', 'User'],
      ['user.updated', 'User'],
      ['item.created', 'Item'],
      ['order.created', 'Order'],
      ['order.replaced', 'Order'],
      ['weather.updated', 'Weather'],
      ['caller.created', 'Caller'],
      ['api_key.created', 'ApiKey'],
      ['api_key.revoked', 'ApiKey'],
      ['operation.completed', 'Operation'],
    ] as const)
      expect(invalid(schema, examples.get(type)!.data), type).toBeUndefined();
    expect(examples.get('user.created')).toMatchObject({
      path: '/v1/users/1',
      data: { id: 1, email: 'ada@example.com' },
    });
    expect(examples.get('user.deleted')!.data).toEqual({ id: 1 });
    expect(examples.get('order.deleted')!.data).toEqual({ id: 1 });
    expect(examples.get('order.status_changed')!.data).toMatchObject({
      status: 'fulfilled',
      previous_status: 'placed',
    });
    expect(examples.get('stock.changed')).toMatchObject({
      path: '/v1/items/1/stock',
      data: { item_id: 1, quantity: 98, reserved: 2, movement: { kind: 'reserve', order_id: 1 } },
    });
    expect(examples.get('weather.observed')!.data).toMatchObject({ place: 'tokyo', observation: { place: 'tokyo' } });
    expect(examples.get('weather.deleted')!.data).toEqual({ id: 1, place: 'tokyo' });
    expect(examples.get('webhook.ping')).toMatchObject({
      path: '/v1/webhook-endpoints/1',
      data: { endpoint_id: 1, url: 'https://hooks.example.com/rowi' },
    });
  });

  it('GET /v1/event-types: public caching with a strong ETag, and 304 when If-None-Match holds it', async () => {
    const first = await test.call({ url: '/v1/event-types', key: null });
    expect(first.headers['cache-control']).toBe('public, max-age=3600');
    expect(first.headers.etag).toMatch(/^"[\w-]+"$/);
    const again = await test.call({
      url: '/v1/event-types',
      key: null,
      headers: { 'if-none-match': first.headers.etag as string },
    });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect((await test.call({ url: '/v1/event-types', key: null })).text).toBe(first.text);
  });
});

describe('GET /v1/event-types with a resource declared beside rowi', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startNotesApp();
  });
  afterAll(() => test.close());

  it("GET /v1/event-types: the declared resource's types last, each with a note made from its schema, when notes are declared", async () => {
    const entries = (await test.call({ url: '/v1/event-types' })).json.data as Json[];
    expect(entries.slice(-3).map((entry) => entry.type)).toEqual(['note.created', 'note.updated', 'note.deleted']);
    const invalid = await validatorOf(test);
    const created = entries.find((entry) => entry.type === 'note.created')!;
    expect(created.resource).toBe('notes');
    expect(created.example).toMatchObject({ type: 'note.created', path: '/v1/notes/1', data: { id: 1 } });
    expect(invalid('Note', created.example.data)).toBeUndefined();
    for (const entry of entries) expect(invalid('Event', entry.example), entry.type).toBeUndefined();
    expect(entries.find((entry) => entry.type === 'note.deleted')!.example.data).toEqual({ id: 1 });
  });
});
