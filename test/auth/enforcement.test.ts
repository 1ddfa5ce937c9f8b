import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { startApp, type TestApp } from '../helpers/app.js';

describe('every route declares its permission', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(async () => test.close());

  it('registering a route without a permission fails at start, naming the route', async () => {
    const app = await buildApp({ config: test.config, storage: test.storage, logger: pino({ level: 'silent' }) });
    try {
      expect(() => app.get('/v1/unguarded', async () => ({ secret: true }))).toThrow(
        /GET \/v1\/unguarded declares no permission/,
      );
      expect(() =>
        app.get('/v1/unguarded-too', { schema: { summary: 'forgot it' } }, async () => ({ secret: true })),
      ).toThrow(/declares no permission/);
    } finally {
      await app.close();
    }
  });

  it('every registered route carries a permission in its OpenAPI operation (x-permission) and protected ones a security requirement', async () => {
    const reply = await test.call({ url: '/v1/openapi.json', key: null });
    expect(reply.status).toBe(200);
    const operations = Object.entries(
      reply.json.paths as Record<string, Record<string, { 'x-permission'?: string; security?: unknown[] }>>,
    ).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({ route: `${method.toUpperCase()} ${path}`, operation })),
    );
    expect(operations.length).toBeGreaterThan(30);
    for (const { route, operation } of operations) {
      // orders:cancel: the one scope beyond the four actions a route declares (docs/access.md, the channel role).
      // authenticated: any valid credential, whatever its scopes (GET /v1/callers/me).
      expect(operation['x-permission'], route).toMatch(
        /^(public|authenticated|[a-z-]+:(read|create|update|delete)|orders:cancel)$/,
      );
      if (operation['x-permission'] === 'public') expect(operation.security, route).toEqual([]);
      else if (operation['x-permission'] === 'authenticated')
        expect(operation.security, route).toEqual([{ apiKey: [] }, { oauth2: [] }, { bearer: [] }]);
      else
        expect(operation.security, route).toEqual([
          { apiKey: [] },
          { oauth2: [operation['x-permission']] },
          { bearer: [] },
        ]);
    }
  });
});
