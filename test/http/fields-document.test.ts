import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResponseChecker } from '../fuzz/responses.js';
import type { Operation } from '../fuzz/requests.js';
import type { Schema } from '../fuzz/arbitraries.js';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { dereferenced } from '../helpers/openapi.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';
import { buildObservation } from '../helpers/weather.js';

/**
 * Answers to `fields=` match the OpenAPI document for a client or proxy that validates them, as
 * every other answer does: each operation that takes `fields` is called with the names its
 * document gives as examples, on records that exist, and its answer (a page, a record, the lines
 * of an NDJSON export) is validated against the schema the document gives for it, `required`
 * and all.
 */
let test: TestApp;
let checker: ResponseChecker;
let operations: Operation[];
const fixtures: Record<string, string> = {};
beforeAll(async () => {
  const folder = tempFolder('fields-document');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: folder, ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  const { user } = await createUser(test);
  const { item } = await createItem(test);
  await setStock(test, item.id, 10);
  const order = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: 'fields', user_id: user.id, lines: [{ item_id: item.id, quantity: 2 }] },
  });
  expect(order.status).toBe(201);
  expect((await test.call({ method: 'PUT', url: '/v1/weather/fields-place', body: buildObservation() })).status).toBe(
    201,
  );
  const target = await createCallerWithKey(test, { role: 'reader', name: 'fields-target' });
  const endpoint = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: 'https://hooks.example.com/fields' },
  });
  const delivery = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.json.id}/ping` });
  const importer = new Importer(test, await listenOnLoopback(test), folder);
  const upload = await importer.upload('items', 'sku,name,price\nFD-1,Good,1.00\nFD-2,Bad,abc\n', {
    query: '?mode=partial',
  });
  await importer.finished(upload.headers.location as string);
  const event = (await test.call({ url: '/v1/events?limit=1' })).json.data[0];
  Object.assign(fixtures, {
    '/v1/users/{id}': String(user.id),
    '/v1/items/{id}': String(item.id),
    '/v1/orders/{id}': String(order.json.id),
    '/v1/weather/{place}': 'fields-place',
    '/v1/callers/{id}': String(target.caller.id),
    '/v1/callers/{id}/keys/{key_id}': String(target.keyId),
    '/v1/webhook-endpoints/{id}': String(endpoint.json.id),
    '/v1/webhook-endpoints/{id}/deliveries/{delivery_id}': String(delivery.json.id),
    '/v1/operations/{id}': String(upload.headers.location).split('/').at(-1)!,
    '/v1/events/{id}': event.id,
  });
  const document = dereferenced(test.app.swagger()) as unknown as {
    paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
    components: { schemas: Record<string, Schema> };
  };
  checker = new ResponseChecker(document.components.schemas);
  operations = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([method]) => method === 'get')
      .map(([, operation]) => ({ ...operation, parameters: operation.parameters ?? [], method: 'GET', path })),
  );
});
afterAll(() => test.close());

/** The path with each parameter given the record made for it (the longest template that names it). */
function concrete(path: string): string {
  return path.replace(/\{([^}]+)\}/g, (_whole, name: string, offset: number) => {
    const template = Object.keys(fixtures)
      .filter((known) => path.startsWith(known.slice(0, known.lastIndexOf('{'))) && known.includes(`{${name}}`))
      .filter((known) => known.indexOf(`{${name}}`) === offset)
      .sort((a, b) => b.length - a.length)[0];
    return template === undefined ? '1' : fixtures[template]!;
  });
}

/** The field lists the document gives as examples of a `fields` parameter (one as `example`, several as `examples`). */
const examplesOf = (parameter: Operation['parameters'][number] & { example?: unknown }) => [
  ...(parameter.example === undefined ? [] : [String(parameter.example)]),
  ...Object.values(parameter.examples ?? {}).map((example) => String(example.value)),
];

describe('answers to fields= against the OpenAPI document', () => {
  it('every GET that takes fields: the answer to each field list its document gives as an example is one its schema accepts, required members and all', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const operation of operations) {
      const fields = operation.parameters.find((parameter) => parameter.in === 'query' && parameter.name === 'fields');
      // The user a token acts for: the admin's key acts for none (404), the acting tests read it.
      if (fields === undefined || operation.path === '/v1/users/me') continue;
      const examples = examplesOf(fields).filter((example) => example !== '');
      expect(examples.length, operation.path).toBeGreaterThan(0);
      for (const names of examples) {
        const url = `${concrete(operation.path)}?fields=${encodeURIComponent(names)}`;
        const started = performance.now();
        const reply = await test.app.inject({ method: 'GET', url, headers: { 'x-api-key': test.adminKey } });
        const answer = {
          status: reply.statusCode,
          headers: reply.headers,
          body: reply.body,
          ms: performance.now() - started,
        };
        if (answer.status !== 200) {
          wrong.push(`${url}: ${answer.status} ${answer.body.slice(0, 200)}`);
          continue;
        }
        checked++;
        const problem = checker.problemWith(operation, answer);
        if (problem !== undefined) wrong.push(`${url}: ${problem}`);
      }
    }
    expect(checked).toBeGreaterThan(30);
    expect(wrong).toEqual([]);
  });

  it("every list that exports: each NDJSON line of an export with fields= is one the document's schema of the line accepts", async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const operation of operations) {
      const ndjson = operation.responses['200']?.content?.['application/x-ndjson'];
      const fields = operation.parameters.find((parameter) => parameter.name === 'fields');
      if (ndjson === undefined || fields === undefined || operation.path.includes('/errors')) continue;
      const names = examplesOf(fields)[0]!;
      const url = `${concrete(operation.path)}?fields=${encodeURIComponent(names)}`;
      const reply = await test.app.inject({
        method: 'GET',
        url,
        headers: { 'x-api-key': test.adminKey, accept: 'application/x-ndjson' },
      });
      expect(reply.statusCode, url).toBe(200);
      checked += reply.body.split('\n').filter(Boolean).length;
      const problem = checker.problemWith(operation, {
        status: reply.statusCode,
        headers: reply.headers,
        body: reply.body,
        ms: 0,
      });
      if (problem !== undefined) wrong.push(`${url}: ${problem}`);
    }
    expect(checked).toBeGreaterThan(5);
    expect(wrong).toEqual([]);
  });

  it('GET /v1/orders?fields=name: 200, a page whose orders hold id and name only, which the document accepts', async () => {
    const operation = operations.find((each) => each.path === '/v1/orders')!;
    const reply = await test.app.inject({
      method: 'GET',
      url: '/v1/orders?fields=name',
      headers: { 'x-api-key': test.adminKey },
    });
    expect(JSON.parse(reply.body).data).toEqual([{ id: expect.any(Number), name: 'fields' }]);
    expect(
      checker.problemWith(operation, { status: 200, headers: reply.headers, body: reply.body, ms: 0 }),
    ).toBeUndefined();
  });
});
