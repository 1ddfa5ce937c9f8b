import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { buildUser, createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Answers rowi stored and serves again later: the answer to an Idempotency-Key, replayed; an
 * operation's summary. One stored by an earlier version of rowi (before a migration added a member,
 * as 0013-owners added created_by) is served as it was stored after an upgrade, an in-place
 * migrate or a restore of an older backup: never a 500 for lacking what that version never wrote.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

/** Rewrites the answer stored for an Idempotency-Key as an earlier version stored it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a stored answer of any shape
async function storeAsEarlier(key: string, change: (body: any) => void): Promise<void> {
  const row = await test.storage.db
    .selectFrom('idempotency_keys')
    .select(['scope', 'response'])
    .where('key', '=', key)
    .executeTakeFirstOrThrow();
  const response = JSON.parse(row.response) as { body: unknown };
  change(response.body);
  await test.storage.db
    .updateTable('idempotency_keys')
    .set({ response: JSON.stringify(response) })
    .where('scope', '=', row.scope)
    .where('key', '=', key)
    .execute();
}

describe('answers stored by an earlier version of rowi', () => {
  it('POST /v1/orders: 201 replayed as stored (JSON and XML) when the answer was stored before created_by existed', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const body = { name: 'before-owners', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] };
    const headers = { 'idempotency-key': 'order-before-owners' };
    const first = await test.call({ method: 'POST', url: '/v1/orders', headers, body });
    expect(first.status).toBe(201);
    await storeAsEarlier('order-before-owners', (stored) => delete stored.created_by);

    const retry = await test.call({ method: 'POST', url: '/v1/orders', headers, body });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    const { created_by: _owner, ...asStored } = first.json;
    expect(retry.json).toEqual(asStored);
    expect(retry.headers.location).toBe(first.headers.location);
    const xml = await test.call({
      method: 'POST',
      url: '/v1/orders',
      headers: { ...headers, accept: 'application/xml' },
      body,
    });
    expect(xml.status).toBe(201);
    expect(xml.text).toContain('<name>before-owners</name>');
    expect(xml.text).not.toContain('created_by');
  });

  it('POST /v1/users/batch: 200 replayed as stored when its records were stored before created_by existed', async () => {
    const body = { create: [buildUser(), buildUser()] };
    const headers = { 'idempotency-key': 'batch-before-owners' };
    const first = await test.call({ method: 'POST', url: '/v1/users/batch', headers, body });
    expect(first.status).toBe(200);
    await storeAsEarlier('batch-before-owners', (stored) => {
      for (const entry of stored.create) delete entry.record.created_by;
    });
    const retry = await test.call({ method: 'POST', url: '/v1/users/batch', headers, body });
    expect(retry.status).toBe(200);
    expect(retry.json.create.map((entry: { record: unknown }) => entry.record)).toEqual(
      first.json.create.map(
        ({ record: { created_by: _owner, ...asStored } }: { record: Record<string, unknown> }) => asStored,
      ),
    );
  });

  it('GET /v1/operations/{id}: 200 with the summary as stored when it lacks a member a later version writes', async () => {
    const importer = new Importer(test, await listenOnLoopback(test), tempFolder('stored-answers'));
    const accepted = await importer.upload('users', `${JSON.stringify(buildUser())}\n`, {
      type: 'application/x-ndjson',
    });
    expect(accepted.status).toBe(202);
    const location = String(accepted.headers.location);
    const finished = await importer.finished(location);
    expect(finished.json.status).toBe('succeeded');
    const id = Number(finished.json.id);
    const { committed: _newer, ...earlier } = finished.json.summary;
    await test.storage.db
      .updateTable('operations')
      .set({ summary: JSON.stringify(earlier) })
      .where('id', '=', id)
      .execute();

    const read = await test.call({ url: location });
    expect(read.status).toBe(200);
    expect(read.json.summary).toEqual(earlier);
    const listed = await test.call({ url: '/v1/operations' });
    expect(listed.status).toBe(200);
    expect(listed.json.data.find((operation: { id: number }) => operation.id === id).summary).toEqual(earlier);
  });
});
