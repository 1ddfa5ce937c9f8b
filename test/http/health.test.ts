import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';

describe('health probes (/health/live, /health/ready)', () => {
  let test: TestApp | undefined;
  afterEach(async () => {
    await test?.close().catch(() => undefined);
    test = undefined;
  });

  it('GET /health/live: 200 {status: pass, version} without credentials, never cached', async () => {
    test = await startApp();
    const reply = await test.call({ url: '/health/live', key: null });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ status: 'pass', version: VERSION });
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.mediaType).toBe('application/json');
  });

  it('GET /health/ready: 200 with the database and migration checks passing, without credentials', async () => {
    test = await startApp();
    const reply = await test.call({ url: '/health/ready', key: null });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      status: 'pass',
      version: VERSION,
      checks: { database: { status: 'pass' }, migrations: { status: 'pass' } },
    });
    expect(typeof reply.json.checks.database.duration_ms).toBe('number');
    expect(reply.headers['cache-control']).toBe('no-store');
  });

  it('HEAD answers both probes with 200 and no body; POST gets 405 with Allow', async () => {
    test = await startApp();
    for (const url of ['/health/live', '/health/ready']) {
      const head = await test.call({ method: 'HEAD', url, key: null });
      expect(head.status, url).toBe(200);
      expect(head.text, url).toBe('');
      const post = await test.call({ method: 'POST', url, key: null });
      expectProblem(post, 405, 'method-not-allowed');
      expect(post.headers.allow, url).toBe('GET, HEAD, OPTIONS');
    }
  });

  it('GET /health/ready: 503 problem with Retry-After naming the migration the database lacks; live stays 200', async () => {
    test = await startApp();
    await sql`delete from kysely_migration where name = '0003-callers-audit'`.execute(test.storage.db);
    const reply = await test.call({ url: '/health/ready', key: null });
    const problem = expectProblem(reply, 503, 'service-unavailable');
    expect(reply.headers['retry-after']).toBe('5');
    expect(problem.checks).toMatchObject({
      database: { status: 'pass' },
      migrations: { status: 'fail', output: 'migrations not applied yet: 0003-callers-audit' },
    });
    expect((await test.call({ url: '/health/live', key: null })).status).toBe(200);
  });

  it('GET /health/ready: 503 when the database cannot be reached, without its error text; live stays 200', async () => {
    test = await startApp();
    await test.storage.close();
    const reply = await test.call({ url: '/health/ready', key: null });
    const problem = expectProblem(reply, 503, 'service-unavailable');
    expect(problem.checks).toMatchObject({
      database: { status: 'fail', output: 'the database did not answer' },
      migrations: { status: 'fail', output: 'the migrations could not be read' },
    });
    expect((await test.call({ url: '/health/live', key: null })).status).toBe(200);
  });

  it('probes are not recorded in the audit trail; API requests around them are', async () => {
    test = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '60000' });
    await test.call({ url: '/health/live', key: null });
    await test.call({ url: '/health/ready', key: null });
    await test.call({ url: '/v1/users?limit=1' });
    await test.app.close();
    const paths = (await test.storage.db.selectFrom('audit_events').select('path').execute()).map((row) => row.path);
    expect(paths).toEqual(['/v1/users']);
  });

  it('the OpenAPI document describes both probes as public operations (no security)', async () => {
    test = await startApp();
    const document = (await test.call({ url: '/v1/openapi.json', key: null })).json;
    for (const path of ['/health/live', '/health/ready']) {
      expect(document.paths[path].get, path).toMatchObject({ 'x-permission': 'public', security: [] });
    }
    expect(document.paths['/health/ready'].get.responses['503']).toBeDefined();
  });
});
