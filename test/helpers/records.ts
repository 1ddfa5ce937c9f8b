import type { Role } from '../../src/db/database.js';
import { createApiKey } from '../../src/resources/callers/api-keys.service.js';
import { createCaller } from '../../src/resources/callers/callers.service.js';
import type { Item } from '../../src/resources/items/items.schema.js';
import type { TestApp } from './app.js';

/** Valid bodies of records, and records made through the API (or, for callers, in storage). */

let sequence = 0;

/** A valid user body; every call gets a distinct email. */
export function buildUser(overrides: Record<string, unknown> = {}) {
  sequence++;
  return { name: `User ${sequence}`, email: `user${sequence}.${process.pid}@example.com`, ...overrides };
}

/** Creates a user through the API and returns its body and ETag. */
export async function createUser(test: TestApp, overrides: Record<string, unknown> = {}) {
  const reply = await test.call({ method: 'POST', url: '/v1/users', body: buildUser(overrides) });
  if (reply.status !== 201) throw new Error(`could not create user: ${reply.status} ${reply.text}`);
  return {
    user: reply.json as { id: number; name: string; email: string; created_at: string; updated_at: string },
    etag: String(reply.headers.etag),
  };
}

let skuSequence = 0;

/** A valid item body; every call gets a distinct SKU. */
export function buildItem(overrides: Record<string, unknown> = {}) {
  skuSequence++;
  return { name: `Item ${skuSequence}`, sku: `SKU-${skuSequence}-${process.pid}`, price: '2.50', ...overrides };
}

/** Creates an item through the API and returns its body and ETag. */
export async function createItem(test: TestApp, overrides: Record<string, unknown> = {}) {
  const reply = await test.call({ method: 'POST', url: '/v1/items', body: buildItem(overrides) });
  if (reply.status !== 201) throw new Error(`could not create item: ${reply.status} ${reply.text}`);
  return { item: reply.json as Item, etag: String(reply.headers.etag) };
}

/** Sets an item's on-hand quantity through the API and returns the stock's new ETag. */
export async function setStock(test: TestApp, itemId: number, quantity: number) {
  const reply = await test.call({ method: 'PUT', url: `/v1/items/${itemId}/stock`, body: { quantity } });
  if (reply.status !== 200) throw new Error(`could not set stock: ${reply.status} ${reply.text}`);
  return String(reply.headers.etag);
}

let callerSequence = 0;

/** A caller with a role (and grants) and a fresh API key, made directly in storage. */
export async function createCallerWithKey(
  test: TestApp,
  options: { role: Role; name?: string; extra_scopes?: string[]; removed_scopes?: string[] },
) {
  callerSequence++;
  return test.storage.db.transaction().execute(async (trx) => {
    const caller = await createCaller(trx, { name: options.name ?? `caller-${callerSequence}`, ...options });
    const { record, key } = await createApiKey(trx, caller.id);
    return { caller, key, keyId: record.id };
  });
}

/**
 * A caller as the admin makes one through the API (POST /v1/callers with `body`: its role, grants,
 * record access), and an API key of it.
 */
export async function createCallerThroughApi(
  test: TestApp,
  name: string,
  body: Record<string, unknown>,
): Promise<{ id: number; name: string; key: string }> {
  const created = await test.call({ method: 'POST', url: '/v1/callers', body: { name, ...body } });
  if (created.status !== 201) throw new Error(`could not create caller: ${created.status} ${created.text}`);
  const key = await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} });
  return { id: created.json.id as number, name, key: key.json.key as string };
}

/** A record as a test reads it. */
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** POSTs `body` to `url` with `key`, which must answer 201; the record created. */
export async function createWithKey(test: TestApp, key: string, url: string, body: unknown): Promise<Row> {
  const reply = await test.call({ method: 'POST', url, body, key });
  if (reply.status !== 201) throw new Error(`could not create at ${url}: ${reply.status} ${reply.text}`);
  return reply.json;
}
