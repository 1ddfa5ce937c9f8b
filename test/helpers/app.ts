import type { FastifyInstance, InjectOptions } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import type { ResourceModule } from '../../src/engine/resource.js';
import { prepareDatabase } from '../../src/process/startup.js';
import { ensureFirstAdmin } from '../../src/resources/callers/api-keys.service.js';
import { createTestDatabase } from './database.js';
import { NO_RATE_LIMITS } from './rate-limits.js';

/** The real app, in-process, on a fresh database of the run's backend, and a way to call it. */
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

/**
 * Load shedding on event-loop lag off unless a test sets it (test/http/load-shedding.test.ts does):
 * a test machine busy with other files, or other work, lags past ROWI_MAX_EVENT_LOOP_DELAY (1 s) at
 * times, and the 503s that follow are the machine's, not an answer under test.
 */
const NO_LOAD_SHEDDING = { ROWI_MAX_EVENT_LOOP_DELAY: '0' };

/**
 * A fresh database of the run's backend per call (see database.ts), migrated, with the real app on
 * it (logging to `logger`); with `resources` declared beside rowi's own, whose tables `prepare` makes.
 */
export async function startApp(
  settings: Record<string, string> = {},
  logger: pino.Logger = pino({ level: 'silent' }),
  extra: { resources?: readonly ResourceModule[]; prepare?: (storage: Storage) => Promise<void> } = {},
): Promise<TestApp> {
  const database = await createTestDatabase();
  const config = loadConfig({
    ...database.env,
    ROWI_LOG_LEVEL: 'silent',
    ...NO_RATE_LIMITS,
    ...NO_LOAD_SHEDDING,
    ...settings,
  });
  const storage = await openStorage(config, logger);
  await prepareDatabase(storage);
  await extra.prepare?.(storage);
  const admin = await ensureFirstAdmin(storage.db);
  let built: FastifyInstance | undefined;
  try {
    built = await buildApp({ config, storage, logger, ...(extra.resources ? { resources: extra.resources } : {}) });
    await built.ready();
  } catch (error) {
    await built?.close();
    await storage.close();
    await database.drop();
    throw error;
  }
  const app = built;
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
  const response = await app.inject({
    method: options.method ?? 'GET',
    url: options.url,
    headers,
    ...(payload !== undefined ? { payload } : {}),
  });
  const mediaType = String(response.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim();
  let json: unknown;
  if (mediaType.endsWith('json') && !mediaType.endsWith('ndjson') && response.body !== '')
    json = JSON.parse(response.body);
  return { status: response.statusCode, headers: response.headers, text: response.body, json, mediaType };
}

/** Serves the test app on a loopback port as well (for a browser or an HTTP client); returns its origin. */
export async function listenOnLoopback(test: TestApp): Promise<string> {
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const address = test.app.server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
}

/** A request from a given client address (in-process injection lets the test choose it), as it comes: no key added. */
export async function callFrom(test: TestApp, address: string, options: InjectOptions): Promise<Reply> {
  const response = await test.app.inject({ remoteAddress: address, ...options });
  const mediaType = String(response.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim();
  return {
    status: response.statusCode,
    headers: response.headers,
    text: response.body,
    json: mediaType.endsWith('json') ? JSON.parse(response.body) : undefined,
    mediaType,
  };
}
