import type { FastifyInstance, InjectOptions } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { prepareDatabase } from '../../src/listen.js';
import type { Role } from '../../src/db/database.js';
import { createApiKey, ensureFirstAdmin } from '../../src/resources/callers/api-keys.service.js';
import { createCaller } from '../../src/resources/callers/callers.service.js';
import type { Item } from '../../src/resources/items/items.schema.js';
import { createTestDatabase } from './database.js';
import { NO_RATE_LIMITS } from './limits.js';

export interface TestApp {
  app: FastifyInstance;
  storage: Storage;
  config: Config;
  /** The API key of the admin caller created on the empty database; call() sends it unless told otherwise. */
  adminKey: string;
  /** One request through the real app (in-process HTTP injection). */
  call(options: CallOptions): Promise<Reply>;
  close(): Promise<void>;
}

export interface CallOptions {
  method?: InjectOptions['method'];
  url: string;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string is sent as is (set content-type yourself). */
  body?: unknown;
  /**
   * The X-API-Key to send: the admin's by default, null for none. Ignored when `headers`
   * already carry X-API-Key or Authorization.
   */
  key?: string | null;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  /** The body parsed as JSON when it is JSON, else undefined. */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  mediaType: string;
}

/** A fresh database of the run's backend per call (see database.ts), migrated, with the real app on it. */
export async function startApp(settings: Record<string, string> = {}): Promise<TestApp> {
  const database = await createTestDatabase();
  const config = loadConfig({ ...database.env, ROWI_LOG_LEVEL: 'silent', ...NO_RATE_LIMITS, ...settings });
  const logger = pino({ level: 'silent' });
  const storage = await openStorage(config, logger);
  await prepareDatabase(storage);
  const admin = await ensureFirstAdmin(storage.db);
  const app = await buildApp({ config, storage, logger });
  await app.ready();
  return {
    app,
    storage,
    config,
    adminKey: admin!.key,
    call: (options) => call(app, { ...options, key: options.key === undefined ? admin!.key : options.key }),
    async close() {
      await app.close();
      await storage.close();
      await database.drop();
    },
  };
}

export async function call(app: FastifyInstance, options: CallOptions): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  const hasCredentials = Object.keys(headers).some((name) => /^(x-api-key|authorization)$/i.test(name));
  if (typeof options.key === 'string' && !hasCredentials) headers['x-api-key'] = options.key;
  let payload: string | undefined;
  if (typeof options.body === 'string') payload = options.body;
  else if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await app.inject({ method: options.method ?? 'GET', url: options.url, headers, ...(payload !== undefined ? { payload } : {}) });
  const mediaType = String(response.headers['content-type'] ?? '').split(';')[0]!.trim();
  let json: unknown;
  if (mediaType.endsWith('json') && response.body !== '') json = JSON.parse(response.body);
  return { status: response.statusCode, headers: response.headers, text: response.body, json, mediaType };
}

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
  return { user: reply.json as { id: number; name: string; email: string; created_at: string; updated_at: string }, etag: String(reply.headers.etag) };
}

/** Every stored user row, in id order: what "nothing stored changed" is checked against. */
export function storedUsers(test: TestApp) {
  return test.storage.db.selectFrom('users').selectAll().orderBy('id').execute();
}

/** Asserts an RFC 9457 problem of the given status and type, in JSON. */
export function expectProblem(reply: Reply, status: number, type: string) {
  const problem = reply.json as Record<string, unknown>;
  const failures: string[] = [];
  if (reply.status !== status) failures.push(`status ${reply.status} ≠ ${status}`);
  if (reply.mediaType !== 'application/problem+json') failures.push(`media type ${reply.mediaType}`);
  if (problem?.type !== `/problems/${type}`) failures.push(`type ${String(problem?.type)} ≠ /problems/${type}`);
  if (problem?.status !== status) failures.push(`problem status ${String(problem?.status)}`);
  for (const member of ['title', 'detail', 'instance', 'request_id']) {
    if (typeof problem?.[member] !== 'string' || problem[member] === '') failures.push(`missing ${member}`);
  }
  if (problem?.request_id !== reply.headers['x-request-id']) failures.push('request_id ≠ X-Request-Id');
  if (failures.length > 0) throw new Error(`not the expected problem (${failures.join('; ')}): ${reply.text}`);
  return problem as { type: string; title: string; status: number; detail: string; instance: string; request_id: string; errors?: { in: string; pointer: string; detail: string }[] } & Record<string, unknown>;
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

/**
 * Every stored item, stock, ledger, order and order-line row, in key order: what "nothing
 * stored changed" is checked against after a refused inventory or order request.
 */
export async function storedInventory(test: TestApp) {
  const db = test.storage.db;
  return {
    items: await db.selectFrom('items').selectAll().orderBy('id').execute(),
    stock: await db.selectFrom('stock').selectAll().orderBy('item_id').execute(),
    movements: await db.selectFrom('stock_movements').selectAll().orderBy('id').execute(),
    orders: await db.selectFrom('orders').selectAll().orderBy('id').execute(),
    lines: await db.selectFrom('order_lines').selectAll().orderBy('order_id').orderBy('item_id').execute(),
  };
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
