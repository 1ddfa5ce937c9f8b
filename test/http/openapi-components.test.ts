import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nameComponents } from '../../src/http/openapi-components.js';
import { startApp, type TestApp } from '../helpers/app.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let test: TestApp;
let document: Json;
let size: number;
beforeAll(async () => {
  test = await startApp({ ROWI_PUBLIC_URL: 'https://api.example.com' });
  const reply = await test.call({ url: '/v1/openapi.json' });
  size = reply.text.length;
  document = reply.json as Json;
});
afterAll(() => test.close());

const schemaOf = (path: string, method: string, status?: string) => {
  const operation = document.paths[path][method];
  return status === undefined
    ? operation.requestBody.content['application/json'].schema
    : operation.responses[status].content['application/json'].schema;
};
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

describe('GET /v1/openapi.json: named components', () => {
  it('every resource, its create, replace and change bodies, its page, problems and events are named components referenced with $ref', () => {
    expect(Object.keys(document.components.schemas)).toEqual(
      expect.arrayContaining([
        'User',
        'UserCreate',
        'UserReplace',
        'UserPatch',
        'UserPage',
        'Item',
        'ItemCreate',
        'ItemPage',
        'Stock',
        // A movement as its list answers it, an export's lines included (its order embedded with expand=order).
        'ExpandedStockMovement',
        'StockMovementPage',
        'Order',
        'OrderCreate',
        'OrderPatch',
        'OrderPage',
        'Weather',
        'Observation',
        'ObservationInput',
        'Caller',
        'CallerCreate',
        'ApiKey',
        'NewApiKey',
        'AuditEvent',
        'AuditEventPage',
        'Event',
        'EventPage',
        'WebhookEndpoint',
        'WebhookDelivery',
        'Problem',
        'Limits',
        'Health',
        'Token',
      ]),
    );
    expect(schemaOf('/v1/users', 'post')).toEqual(ref('UserCreate'));
    expect(schemaOf('/v1/users', 'post', '201')).toEqual(ref('User'));
    expect(schemaOf('/v1/users', 'get', '200')).toEqual(ref('UserPage'));
    // A read or a list takes fields=: its records are those of the variant with only id required (fields-document.ts).
    expect(document.components.schemas.UserPage.properties.data.items).toEqual(ref('UserFields'));
    expect(schemaOf('/v1/users/{id}', 'get', '200')).toEqual(ref('UserFields'));
    expect(document.components.schemas.UserFields).toMatchObject({
      required: ['id'],
      properties: document.components.schemas.User.properties,
    });
    expect(schemaOf('/v1/users/{id}', 'patch', '200')).toEqual(ref('User'));
    expect(document.paths['/v1/users/{id}'].get.responses['404']).toEqual({ $ref: '#/components/responses/NotFound' });
    expect(document.components.responses.NotFound.content['application/problem+json'].schema).toEqual(ref('Problem'));
    expect(document.components.headers['X-Request-Id'].schema).toMatchObject({ type: 'string' });
  });

  it('the document is small enough to read: under 610 KB (it was 800 KB with every schema inlined; 450 KB with batches, imports, operations and exports; 513 KB with fields, expand, backups and the orders import; 586 KB with the variant of each record as fields= answers it; 600 KB with who am I, webhook endpoint health and the event-type catalogue, the scopes and the subscribed event types each written once)', () => {
    expect(size).toBeLessThan(610_000);
  });

  it('servers names ROWI_PUBLIC_URL; info has a license and a contact', () => {
    expect(document.servers).toEqual([{ url: 'https://api.example.com', description: 'rowi', 'x-internal': false }]);
    expect(document.info.license).toEqual({ name: 'MIT', identifier: 'MIT' });
    expect(document.info.contact).toEqual({ name: 'rowi maintainers', url: 'https://api.example.com/docs' });
  });
});

describe('nameComponents', () => {
  it('throws when two different schemas carry one title (a client would get one type for both)', () => {
    const schema = (type: string) => ({ title: 'Thing', type: 'object', properties: { a: { type } } });
    const doc = {
      paths: {
        '/a': { get: { responses: { 200: { content: { 'application/json': { schema: schema('string') } } } } } },
        '/b': { get: { responses: { 200: { content: { 'application/json': { schema: schema('integer') } } } } } },
      },
    };
    expect(() => nameComponents(doc)).toThrow(/Two different schemas are titled Thing/);
  });

  it('leaves titles inside examples alone', () => {
    const doc = {
      paths: {
        '/a': {
          get: {
            responses: {
              200: {
                content: {
                  'application/json': { schema: { type: 'object' }, example: { title: 'Thing', type: 'object' } },
                },
              },
            },
          },
        },
      },
    };
    const named = nameComponents(doc) as Json;
    expect(named.paths['/a'].get.responses['200'].content['application/json'].example).toEqual({
      title: 'Thing',
      type: 'object',
    });
  });
});
