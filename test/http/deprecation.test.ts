import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { addDeprecationHeaders } from '../../src/http/route-completion.js';

/** A bare app with one deprecated operation and one that is not, as app.ts wires the hook. */
async function appWith(schema: Record<string, unknown>) {
  const app = Fastify();
  app.addHook('onRoute', addDeprecationHeaders);
  app.get('/old', { schema }, async () => ({ ok: true }));
  app.get('/current', async () => ({ ok: true }));
  await app.ready();
  return app;
}

describe("deprecated operations (the OpenAPI document's deprecated drives the headers)", () => {
  it('GET /old: Deprecation (RFC 9745, @ and Unix time) and Sunset (RFC 8594, an HTTP date) on its answers; GET /current: neither', async () => {
    const app = await appWith({
      deprecated: true,
      'x-deprecated-at': '2026-12-01T00:00:00Z',
      'x-sunset': '2027-06-30T00:00:00Z',
    });
    const old = await app.inject({ url: '/old' });
    expect(old.statusCode).toBe(200);
    expect(old.headers.deprecation).toBe(`@${Date.UTC(2026, 11, 1) / 1000}`);
    expect(old.headers.sunset).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    const current = await app.inject({ url: '/current' });
    expect(current.headers.deprecation).toBeUndefined();
    expect(current.headers.sunset).toBeUndefined();
    await app.close();
  });

  it('a deprecated operation without a sunset date yet: Deprecation only', async () => {
    const app = await appWith({ deprecated: true, 'x-deprecated-at': '2026-12-01T00:00:00Z' });
    const old = await app.inject({ url: '/old' });
    expect(old.headers.deprecation).toBe(`@${Date.UTC(2026, 11, 1) / 1000}`);
    expect(old.headers.sunset).toBeUndefined();
    await app.close();
  });

  it('a deprecated operation without x-deprecated-at, or with a bad date, stops the app at start', async () => {
    await expect(appWith({ deprecated: true })).rejects.toThrow(/deprecated without x-deprecated-at/);
    await expect(
      appWith({ deprecated: true, 'x-deprecated-at': '2026-12-01T00:00:00Z', 'x-sunset': 'soon' }),
    ).rejects.toThrow(/x-sunset/);
  });
});
