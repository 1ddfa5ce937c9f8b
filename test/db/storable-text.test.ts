import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback, startApp, type Reply, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { keptLog, type LogLine } from '../helpers/log.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Text a request brings that rowi records rather than refuses (the path it asked for, the subject
 * of a token, a key of an uploaded row) reaches the database in a form both databases store:
 * PostgreSQL's text cannot hold U+0000, and one such value made a whole batch of the audit trail
 * fail, for ever, after which nothing was audited. A NUL is stored as U+2400 ("␀"), on both.
 */
const requestIdOf = (reply: Reply) => String(reply.headers['x-request-id']);

async function auditEventsOf(test: TestApp, requestIds: string[]) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const rows = await test.storage.db
      .selectFrom('audit_events')
      .select(['request_id', 'path', 'record_id', 'caller_name', 'status'])
      .where('request_id', 'in', requestIds)
      .execute();
    if (rows.length >= requestIds.length) return rows;
    if (Date.now() > deadline)
      throw new Error(`${rows.length} of ${requestIds.length} audit events written within 5 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('text with a NUL that a request brings', () => {
  let test: TestApp;
  let issuer: LocalIssuer;
  let log: LogLine[];

  beforeAll(async () => {
    issuer = await startIssuer({ audience: 'rowi-storable' });
    const kept = keptLog('warn');
    log = kept.log;
    test = await startApp(
      {
        ROWI_AUDIT_FLUSH_INTERVAL: '50',
        ROWI_JWT_ISSUER: issuer.url,
        ROWI_JWT_AUDIENCE: 'rowi-storable',
        ROWI_JWT_JWKS_URL: issuer.jwksUrl,
      },
      kept.logger,
    );
  });
  afterAll(async () => {
    await test.close();
    await issuer.close();
  });

  it('GET /v1/users/1%00: 404 (401 without credentials), and it and every request after it are in the audit trail, the NUL shown as ␀', async () => {
    const refused = [
      await test.call({ url: '/v1/users/1%00' }),
      await test.call({ url: '/v1/users/1%00', key: null }),
      await test.call({ url: '/v1/weather/a%00b' }),
      await test.call({ url: '/v1/items/%00' }),
    ];
    expect(refused.map((reply) => reply.status)).toEqual([404, 401, 404, 404]);
    const later = await test.call({ url: '/v1/users?limit=1' });
    expect(later.status).toBe(200);

    const events = await auditEventsOf(test, [...refused, later].map(requestIdOf));
    const byId = new Map(events.map((event) => [event.request_id, event]));
    expect(refused.map((reply) => byId.get(requestIdOf(reply)))).toMatchObject([
      { path: '/v1/users/1%00', record_id: '1\u2400', status: 404 },
      { path: '/v1/users/1%00', record_id: '1\u2400', status: 401 },
      { path: '/v1/weather/a%00b', record_id: 'a\u2400b', status: 404 },
      { path: '/v1/items/%00', record_id: '\u2400', status: 404 },
    ]);
    expect(byId.get(requestIdOf(later))).toMatchObject({ path: '/v1/users', status: 200 });
    expect(log.filter((line) => /audit/.test(line.msg))).toEqual([]);
  });

  it('GET /v1/users: 401 invalid-credentials when an external token is signed with a sub that holds a NUL; later requests are audited', async () => {
    const token = await issuer.sign({ sub: 'robot\u0000one', scope: 'users:read users:create' });
    const refused = await test.call({ url: '/v1/users', headers: { authorization: `Bearer ${token}` } });
    const problem = expectProblem(refused, 401, 'invalid-credentials');
    expect(problem.detail).toMatch(/sub claim contains a NUL character/);
    // An idempotent write keys its record by the subject: refused the same way, never a 500.
    const write = await test.call({
      method: 'POST',
      url: '/v1/users',
      body: buildUser(),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': 'nul-subject' },
    });
    expectProblem(write, 401, 'invalid-credentials');
    const later = await test.call({ url: '/v1/users?limit=1' });
    const events = await auditEventsOf(test, [refused, write, later].map(requestIdOf));
    expect(events.map((event) => event.status).sort()).toEqual([200, 401, 401]);
  });

  it('POST /v1/users/import: the operation succeeds with the row refused by its key when an NDJSON row has a key that holds a NUL', async () => {
    const importer = new Importer(test, await listenOnLoopback(test), tempFolder('storable-import'));
    const accepted = await importer.upload(
      'users',
      `${JSON.stringify({ ...buildUser(), 'x\u0000y': 1 })}\n${JSON.stringify(buildUser())}\n`,
      { type: 'application/x-ndjson', query: '?mode=partial' },
    );
    expect(accepted.status).toBe(202);
    const finished = await importer.finished(String(accepted.headers.location));
    expect(finished.json).toMatchObject({
      status: 'succeeded',
      progress: { rows_read: 2, rows_succeeded: 1, rows_failed: 1 },
      errors: [{ row: 1, field: 'x\u2400y', problem: 'malformed-row' }],
    });
  });
});
