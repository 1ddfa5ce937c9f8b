import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The bench's own baseline, as the bench loads it: rowi's routes without authentication and audit.
import { buildUnauthenticatedApp } from '../../bench/unauthenticated-server.mjs';
import { loadConfig } from '../../src/config/config.js';
import { openStorage } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * The benchmark's "rowi without authentication" server imports rowi's built modules (here the
 * sources, through vitest.config.ts's alias) and wires them as app.ts does; nothing else loads it,
 * so a change of a module's interface would break the bench silently (it did once), or let it
 * drift from app.ts (it had: no rate limits, no XML serialisers). It must start, answer what rowi
 * answers, and close.
 */
describe('the bench baseline without authentication', () => {
  let app: Awaited<ReturnType<typeof buildUnauthenticatedApp>>;
  let storage: Awaited<ReturnType<typeof openStorage>>;

  beforeAll(async () => {
    const config = loadConfig({ ROWI_DATA: join(tempFolder('bench-baseline'), 'rowi.db'), ROWI_LOG_LEVEL: 'silent' });
    const logger = pino({ level: 'silent' });
    storage = await openStorage(config, logger);
    await migrateToLatest(storage.db);
    app = await buildUnauthenticatedApp({ config, storage, logger });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await storage.close();
  });

  it('creates and reads a user, answers 404 as rowi does, and places an order', async () => {
    const created = await app.inject({
      method: 'POST',
      url: '/v1/users',
      payload: { name: 'Bench', email: 'bench@example.com' },
    });
    expect(created.statusCode).toBe(201);
    const user = created.json() as { id: number };
    const read = await app.inject({ url: `/v1/users/${user.id}` });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ id: user.id, name: 'Bench', email: 'bench@example.com' });
    // Counted as rowi counts a request without credentials, and served in XML when asked.
    expect(read.headers['ratelimit-policy']).toMatch(/^"address";q=\d+;w=60$/);
    const xml = await app.inject({ url: `/v1/users/${user.id}`, headers: { accept: 'application/xml' } });
    expect(xml.statusCode).toBe(200);
    expect(xml.body).toContain('<email>bench@example.com</email>');
    const missing = await app.inject({ url: '/v1/users/999999' });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['content-type']).toMatch(/^application\/problem\+json/);
    const item = (
      await app.inject({
        method: 'POST',
        url: '/v1/items',
        payload: { name: 'Bench item', sku: 'BENCH-1', price: '1.00' },
      })
    ).json() as { id: number };
    expect(
      (await app.inject({ method: 'PUT', url: `/v1/items/${item.id}/stock`, payload: { quantity: 5 } })).statusCode,
    ).toBe(200);
    const order = await app.inject({
      method: 'POST',
      url: '/v1/orders',
      payload: { name: 'B-1', user_id: user.id, lines: [{ item_id: item.id, quantity: 2 }] },
    });
    expect(order.statusCode).toBe(201);
    expect(order.json()).toMatchObject({ status: 'placed', total: '2.00' });
  });
});
