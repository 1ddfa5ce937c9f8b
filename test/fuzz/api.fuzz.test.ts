import { dereferenced } from '../helpers/openapi.js';
import { request as httpRequest } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';
import { buildObservation } from '../helpers/weather.js';
import { ResponseChecker } from './responses.js';
import { requestFor, type FuzzRequest, type Operation } from './requests.js';
import type { Schema } from './arbitraries.js';

/**
 * Property-based fuzzing of every operation of the OpenAPI document, against the real app on the
 * run's database: valid requests drawn from the document's schemas, then mutated (wrong types,
 * edge and huge values, odd Unicode, NUL, duplicate and reserved keys, deep nesting, XML of the
 * same and of shapes no document has, odd query strings and headers, Accept of every format and
 * export), on records the run made (an import and a backup among them, for the operations).
 * Every answer must be one the document lists for its operation, never a 5xx, with a body its
 * schema accepts (one to `fields=` too; each line of NDJSON), within 2 s, and never a success to a
 * query parameter the operation does not list; every method a path does not list is 405 with the
 * Allow of those it does; and the app must still answer afterwards. A second caller sees only its own users, items and
 * orders (docs/access.md): no answer to it, no event listed for it and no message of its stream
 * carries the id of another owner's record.
 *
 * Seeded: ROWI_TEST_FUZZ_SEED replays a run, ROWI_TEST_FUZZ_RUNS raises the number of requests per
 * operation for a long run. A failure shows the seed and the shrunk request.
 */
const SEED = Number(process.env.ROWI_TEST_FUZZ_SEED ?? 20_261_124);
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const RUNS_PER_OPERATION = Number(process.env.ROWI_TEST_FUZZ_RUNS ?? 50);

let test: TestApp;
let checker: ResponseChecker;
let operations: Operation[];
let credentials: { admin: string; reader: string; own: string };
/** The caller that sees only its own records, and what it was answered with (checked at the end). */
const own = { id: 0, firstEventId: '' };
const answeredToOwn = {
  users: new Set<number>(),
  items: new Set<number>(),
  orders: new Set<number>(),
  events: new Set<string>(),
};
let fixtures: Record<string, (string | number)[]>;
let references: Record<string, unknown[]>;
/** The app over a real socket: an event stream's answer never ends, so it is read there and cut. */
let base: string;

beforeAll(async () => {
  // Load shedding off: the fuzzing sends 50 requests of an operation at once, which on a fast
  // in-process inject keeps the event loop busy past ROWI_MAX_EVENT_LOOP_DELAY (1 s) on some
  // machines, and the 503s that follow are the burst's, not an answer under test (load shedding has
  // its own tests in test/http/load-shedding.test.ts).
  // Backups into a folder of their own: on SQLite the fuzzing reaches POST /v1/backups's 202 and a real backup to read; on PostgreSQL its 409.
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0', ROWI_BACKUP_DIR: tempFolder('fuzz-backups') });
  const document = dereferenced(test.app.swagger()) as unknown as {
    paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
    components: { schemas: Record<string, Schema> };
  };
  checker = new ResponseChecker(document.components.schemas);
  operations = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      ...operation,
      parameters: operation.parameters ?? [],
      method: method.toUpperCase(),
      path,
    })),
  );
  // Records to aim at; never the admin the fuzzing runs as (caller 1, key 1).
  await createUser(test);
  const { user } = await createUser(test);
  await createItem(test);
  const { item } = await createItem(test);
  await setStock(test, item.id, 1_000_000_000);
  const order = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: 'fuzz', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
  });
  const reader = await createCallerWithKey(test, { role: 'reader', name: 'fuzz-reader' });
  const target = await createCallerWithKey(test, { role: 'editor', name: 'fuzz-target' });
  await test.call({ method: 'PUT', url: '/v1/weather/fuzz-place', body: buildObservation() });
  const endpoint = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: 'https://hooks.example.com/fuzz' },
  });
  const ping = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.json.id}/ping` });
  const [event] = (await test.call({ url: '/v1/events?limit=1' })).json.data;
  const ownCaller = await test.call({
    method: 'POST',
    url: '/v1/callers',
    body: {
      name: 'fuzz-own',
      role: 'editor',
      extra_scopes: ['users:delete', 'items:delete', 'orders:delete'],
      record_access: { users: 'own', items: 'own', orders: 'own' },
    },
  });
  own.id = ownCaller.json.id;
  const ownKey = (await test.call({ method: 'POST', url: `/v1/callers/${own.id}/keys`, body: {} })).json.key as string;
  const ownUser = await test.call({
    method: 'POST',
    url: '/v1/users',
    key: ownKey,
    body: { name: 'own', email: 'own@fuzz.example' },
  });
  const ownItem = await test.call({
    method: 'POST',
    url: '/v1/items',
    key: ownKey,
    body: { name: 'own', sku: 'OWN-FUZZ', price: '1.00' },
  });
  await setStock(test, ownItem.json.id, 1_000_000_000);
  const ownOrder = await test.call({
    method: 'POST',
    url: '/v1/orders',
    key: ownKey,
    body: { name: 'own', user_id: ownUser.json.id, lines: [{ item_id: ownItem.json.id, quantity: 1 }] },
  });
  own.firstEventId = (await test.call({ url: '/v1/events?limit=1', key: ownKey })).json.data[0].id;
  const backup = await test.call({ method: 'POST', url: '/v1/backups' });
  let backupName = 'rowi-none.sqlite';
  for (let attempt = 0; backup.status === 202 && attempt < 200; attempt++) {
    const operation = await test.call({ url: backup.headers.location as string });
    if (operation.json.status === 'succeeded') backupName = operation.json.summary.backup.file as string;
    if (!['queued', 'running'].includes(operation.json.status)) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
  // An import that ended with a refused row: an operation to read, list, cancel and download the errors of.
  const upload = await fetch(`${base}/v1/items/import?mode=partial`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv', 'x-api-key': test.adminKey },
    body: 'sku,name,price\nFUZZ-IMPORT-1,Imported,1.00\nFUZZ-IMPORT-2,Refused,abc\n',
  });
  expect(upload.status).toBe(202);
  const imported = upload.headers.get('location')!;
  for (let attempt = 0; attempt < 200; attempt++) {
    if (!['queued', 'running'].includes((await test.call({ url: imported })).json.status)) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  credentials = { admin: test.adminKey, reader: reader.key, own: ownKey };
  references = { user_id: [user.id, ownUser.json.id], item_id: [item.id, ownItem.json.id] };
  fixtures = {
    '/v1/users': [user.id, ownUser.json.id],
    '/v1/items': [item.id, ownItem.json.id],
    '/v1/orders': [order.json.id, ownOrder.json.id],
    '/v1/callers': [target.caller.id],
    '/v1/callers/keys': [target.keyId],
    '/v1/weather': ['fuzz-place', 'FUZZ-PLACE'],
    '/problems': ['not-found', 'validation-failed', 'nope'],
    '/v1/webhook-endpoints': [endpoint.json.id],
    '/v1/webhook-endpoints/deliveries': [ping.json.id],
    '/v1/events': [event.id],
    '/v1/backups': [backupName, 'rowi-none.sqlite'],
    '/v1/operations': [
      Number(imported.split('/').at(-1)),
      ...(backup.status === 202 ? [backup.json.id as number] : []),
    ],
  };
});
afterAll(() => test.close());

function fixturesFor(path: string, parameter: string): (string | number)[] {
  if (parameter === 'key_id') return fixtures['/v1/callers/keys']!;
  if (parameter === 'delivery_id') return fixtures['/v1/webhook-endpoints/deliveries']!;
  const collection = Object.keys(fixtures).find((prefix) => path.startsWith(`${prefix}/`) || path === prefix);
  return collection === undefined ? [] : fixtures[collection]!;
}

/**
 * What an answer to the own-only caller names: records (an object with created_by: which must be
 * its own at once), the users, items and orders it refers to (user_id, item_id, order_id, and the
 * record of an event's path) and events, whose owners are looked up once the run is over.
 */
function noteAnsweredToOwn(value: unknown, path: string): void {
  if (Array.isArray(value)) {
    value.forEach((member) => noteAnsweredToOwn(member, path));
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const record = value as Record<string, unknown>;
  // A record of users, items or orders (its created_by a caller's id or null; the OpenAPI document's schemas have objects there).
  if ((typeof record.created_by === 'number' || record.created_by === null) && !('type' in record && 'path' in record))
    expect(record.created_by, `a record of another owner in the answer to ${path}: ${JSON.stringify(record)}`).toBe(
      own.id,
    );
  if (typeof record.type === 'string' && typeof record.path === 'string' && typeof record.id === 'string') {
    answeredToOwn.events.add(record.id);
    return;
  }
  for (const [field, set] of [
    ['user_id', answeredToOwn.users],
    ['item_id', answeredToOwn.items],
    ['order_id', answeredToOwn.orders],
  ] as const)
    if (typeof record[field] === 'number') set.add(record[field]);
  for (const member of Object.values(record)) noteAnsweredToOwn(member, path);
}

/** A name in the request's query string that the operation does not list, if any. */
function unknownQueryName(operation: Operation, url: string): string | undefined {
  const query = url.indexOf('?');
  if (query === -1) return undefined;
  const known = operation.parameters.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name);
  return url
    .slice(query + 1)
    .split('&')
    .map((pair) => pair.split('=')[0]!)
    .find((name) => name !== '' && !known.includes(name));
}

/** How many answers of each status the run got: what the fuzzing reached. */
const statuses = new Map<number, number>();

async function send(request: FuzzRequest, operation: Operation) {
  const started = performance.now();
  if ((operation as { 'x-event-stream'?: true })['x-event-stream'] && request.method === 'GET')
    return sendToStream(request, started);
  const response = await test.app.inject({
    method: request.method as 'GET',
    url: request.url,
    headers: request.headers,
    ...(request.body !== undefined ? { payload: request.body } : {}),
  });
  statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
  return {
    status: response.statusCode,
    headers: response.headers,
    body: response.body,
    ms: performance.now() - started,
  };
}

/** An event stream: its status and headers, and the body of a refusal; a 200 is cut once its headers are in. */
function sendToStream(request: FuzzRequest, started: number) {
  return new Promise<{
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: string;
    ms: number;
  }>((resolve, reject) => {
    // Header values go as their UTF-8 bytes, as the in-process requests send them (Node's client takes Latin-1 only).
    const headers = Object.fromEntries(
      Object.entries(request.headers).map(([name, value]) => [
        name,
        Buffer.from(String(value), 'utf8').toString('latin1'),
      ]),
    );
    const outgoing = httpRequest(`${base}${request.url}`, { method: request.method, headers }, (response) => {
      const status = response.statusCode ?? 0;
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (status === 200) {
        outgoing.destroy();
        resolve({ status, headers: response.headers, body: '', ms: performance.now() - started });
        return;
      }
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status,
          headers: response.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          ms: performance.now() - started,
        }),
      );
    });
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}

describe('fuzzing every operation of the OpenAPI document', () => {
  it(
    `every answer is documented for its operation, never a 5xx, matches its schema, within 2 s (seed ${SEED}, ${RUNS_PER_OPERATION} requests an operation)`,
    { timeout: 600_000 },
    async () => {
      expect(operations.length).toBeGreaterThan(60);
      // Every operation is fuzzed, and every one that fails is reported with its shrunk request.
      const failures: string[] = [];
      for (const operation of operations) {
        try {
          await fc.assert(
            fc.asyncProperty(requestFor(operation, credentials, fixturesFor, references), async (request) => {
              const answer = await send(request, operation);
              if (
                request.headers['x-api-key'] === credentials.own &&
                // The OpenAPI document's examples are no records of anyone.
                !request.url.startsWith('/v1/openapi') &&
                answer.status < 300 &&
                String(answer.headers['content-type']).startsWith('application/json') &&
                answer.body !== ''
              )
                noteAnsweredToOwn(JSON.parse(answer.body), `${operation.method} ${request.url}`);
              const problem =
                checker.problemWith(operation, answer) ??
                (answer.status < 400 && unknownQueryName(operation, request.url) !== undefined
                  ? `answered ${answer.status} to a query parameter it does not take, ${unknownQueryName(operation, request.url)}`
                  : undefined);
              if (problem !== undefined)
                throw new Error(
                  `${operation.method} ${operation.path}: ${problem}\nanswer ${answer.status}: ${answer.body.slice(0, 600)}`,
                );
            }),
            { seed: SEED, numRuns: RUNS_PER_OPERATION, includeErrorInReport: true },
          );
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
      const counted = [...statuses].sort(([a], [b]) => a - b);
      console.log(
        `fuzz (seed ${SEED}): ${counted.reduce((sum, [, count]) => sum + count, 0)} requests over ${operations.length} operations; statuses ${counted.map(([status, count]) => `${status}×${count}`).join(' ')}`,
      );
      expect(
        failures,
        `${failures.length} operations failed (replay with ROWI_TEST_FUZZ_SEED=${SEED}):\n\n${failures.join('\n\n')}`,
      ).toEqual([]);
      expect((await test.call({ url: '/health/live', key: null })).status).toBe(200);
      expect((await test.call({ url: '/v1/users?limit=1' })).status).toBe(200);
    },
  );

  it(`every path of the document: a method it does not list is 405 with an Allow of those it lists, and OPTIONS 204 with that Allow (seed ${SEED})`, async () => {
    const byPath = new Map<string, Operation[]>();
    for (const operation of operations) byPath.set(operation.path, [...(byPath.get(operation.path) ?? []), operation]);
    const failures: string[] = [];
    for (const [path, served] of byPath) {
      const listed = served.map((operation) => operation.method);
      const allow = [...METHODS, 'OPTIONS']
        .filter((method) => method === 'OPTIONS' || listed.includes(method))
        .join(', ');
      const unlisted = [...METHODS.filter((method) => !listed.includes(method)), 'OPTIONS'];
      // Path parameters from the records the run made and well-formed made-up ones: which path, not whether its value is valid, decides the methods.
      const pathParameters = served[0]!.parameters.filter((parameter) => parameter.in === 'path');
      const url = fc
        .tuple(
          ...pathParameters.map((parameter) =>
            fc.oneof(
              ...(fixturesFor(path, parameter.name).length > 0
                ? [fc.constantFrom(...fixturesFor(path, parameter.name).map(String))]
                : []),
              fc.integer({ min: 1, max: 1_000_000 }).map(String),
            ),
          ),
        )
        .map((values) =>
          pathParameters.reduce((each, parameter, index) => each.replace(`{${parameter.name}}`, values[index]!), path),
        );
      try {
        await fc.assert(
          fc.asyncProperty(
            url,
            fc.constantFrom(...unlisted),
            fc.constantFrom(...Object.values(credentials), undefined),
            async (target, method, key) => {
              const reply = await test.app.inject({
                method: method as 'GET',
                url: target,
                headers: key === undefined ? {} : { 'x-api-key': key },
              });
              statuses.set(reply.statusCode, (statuses.get(reply.statusCode) ?? 0) + 1);
              const expected = method === 'OPTIONS' ? 204 : 405;
              if (reply.statusCode !== expected || reply.headers.allow !== allow)
                throw new Error(
                  `${method} ${target}: ${reply.statusCode} Allow ${String(reply.headers.allow)} (expected ${expected} Allow ${allow})`,
                );
              if (
                method !== 'OPTIONS' &&
                method !== 'HEAD' &&
                JSON.parse(reply.body).allowed_methods.join(', ') !== allow
              )
                throw new Error(`${method} ${target}: allowed_methods ${reply.body}`);
            },
          ),
          { seed: SEED, numRuns: 20 },
        );
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
    expect(byPath.size).toBeGreaterThan(50);
    expect(failures).toEqual([]);
  });

  it("the caller that sees only its own records was never answered, listed or streamed another owner's record", async () => {
    // Its stream from its first event on: every event kept that it sees, then cut.
    const streamed = await new Promise<string>((resolve, reject) => {
      const chunks: string[] = [];
      const outgoing = httpRequest(
        `${base}/v1/events/stream`,
        { headers: { 'x-api-key': credentials.own, 'last-event-id': own.firstEventId } },
        (response) => {
          expect(response.statusCode).toBe(200);
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => chunks.push(chunk));
          setTimeout(() => {
            outgoing.destroy();
            resolve(chunks.join(''));
          }, 1000);
        },
      );
      outgoing.on('error', reject);
      outgoing.end();
    });
    for (const line of streamed.split('\n'))
      if (line.startsWith('data: ')) noteAnsweredToOwn(JSON.parse(line.slice(6)), 'GET /v1/events/stream');
    expect(answeredToOwn.events.size).toBeGreaterThan(0);
    const db = test.storage.db;
    const events = await db
      .selectFrom('events')
      .select(['id', 'resource', 'created_by'])
      .where('id', 'in', [...answeredToOwn.events])
      .execute();
    expect(events.map((event) => event.resource)).not.toContain('stock');
    for (const event of events.filter((event) => ['users', 'items', 'orders'].includes(event.resource)))
      expect(Number(event.created_by), `event ${event.id}`).toBe(own.id);
    expect(events.some((event) => event.resource === 'orders')).toBe(true);
    for (const table of ['users', 'items', 'orders'] as const) {
      const ids = [...answeredToOwn[table]];
      if (ids.length === 0) continue;
      const rows = await db.selectFrom(table).select(['id', 'created_by']).where('id', 'in', ids).execute();
      for (const row of rows) expect(Number(row.created_by), `${table} ${row.id}`).toBe(own.id);
    }
  });
});
