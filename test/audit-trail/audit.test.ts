import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createCallerWithKey } from '../helpers/records.js';
import { BACKEND } from '../helpers/database.js';
import { keptLog } from '../helpers/log.js';
import { sample } from '../helpers/metrics.js';

interface AuditEvent {
  id: number;
  at: string;
  request_id: string;
  caller_id: number | null;
  caller_name: string | null;
  credential: string | null;
  method: string;
  path: string;
  resource: string | null;
  record_id: string | null;
  action: string | null;
  status: number;
  duration_ms: number;
  client_ip: string | null;
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const requestIdOf = (reply: Reply) => String(reply.headers['x-request-id']);

/** Lists audit events (as the admin) until every request id is there; the trail is written in batches. */
async function waitForEvents(test: TestApp, requestIds: string[], query = 'limit=500'): Promise<AuditEvent[]> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const reply = await test.call({ url: `/v1/audit-events?${query}` });
    expect(reply.status).toBe(200);
    const events = reply.json.data as AuditEvent[];
    if (requestIds.every((id) => events.some((event) => event.request_id === id))) return events;
    if (Date.now() > deadline) throw new Error(`audit events for ${requestIds.join(', ')} not listed within 3 s`);
    await sleep(50);
  }
}

describe('the audit trail, written every 50 ms', () => {
  let test: TestApp;
  let reader: Awaited<ReturnType<typeof createCallerWithKey>>;
  let editor: Awaited<ReturnType<typeof createCallerWithKey>>;
  let started: string;
  let finished: string;
  const replies: Record<
    | 'list'
    | 'create'
    | 'read'
    | 'anonymous'
    | 'forbidden'
    | 'unknownPath'
    | 'oauth'
    | 'withToken'
    | 'key'
    | 'place'
    | 'problemType',
    Reply
  > = {} as never;
  let events: AuditEvent[];
  const eventOf = (name: keyof typeof replies) =>
    events.find((event) => event.request_id === requestIdOf(replies[name]))!;

  beforeAll(async () => {
    test = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '50' });
    reader = await createCallerWithKey(test, { role: 'reader', name: 'audit-reader' });
    editor = await createCallerWithKey(test, { role: 'editor', name: 'audit-editor' });
    // The window's bounds lie a few milliseconds clear of every request (after/before are exclusive).
    started = new Date().toISOString();
    await sleep(5);
    // A few milliseconds apart, so that each request arrives at its own instant.
    replies.list = await test.call({ url: '/v1/users?limit=5&email=nobody@example.com' });
    await sleep(5);
    replies.create = await test.call({ method: 'POST', url: '/v1/users', body: buildUser() });
    await sleep(5);
    replies.read = await test.call({ url: `/v1/users/${replies.create.json.id}`, key: editor.key });
    await sleep(5);
    replies.anonymous = await test.call({ url: '/v1/users', key: null });
    await sleep(5);
    replies.forbidden = await test.call({ method: 'POST', url: '/v1/users', key: reader.key, body: buildUser() });
    await sleep(5);
    replies.unknownPath = await test.call({ url: '/v1/nowhere?x=1' });
    await sleep(5);
    replies.oauth = await test.call({
      method: 'POST',
      url: '/oauth/token',
      key: null,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=client_credentials&client_id=audit-editor&client_secret=${editor.key}`,
    });
    await sleep(5);
    replies.withToken = await test.call({
      method: 'DELETE',
      url: '/v1/users/999999',
      headers: { authorization: `Bearer ${replies.oauth.json.access_token}` },
    });
    await sleep(5);
    // The record is the last parameter of the route's path, whatever it is called; a public route names none.
    replies.key = await test.call({ url: `/v1/callers/${editor.caller.id}/keys/999998` });
    await sleep(5);
    replies.place = await test.call({ url: '/v1/weather/nowhere-at-all' });
    await sleep(5);
    replies.problemType = await test.call({ url: '/problems/not-found', key: null });
    await sleep(5);
    finished = new Date().toISOString();
    await sleep(5);
    events = await waitForEvents(test, Object.values(replies).map(requestIdOf));
  });
  afterAll(() => test.close());

  it('the requests were answered as arranged', () => {
    expect(Object.fromEntries(Object.entries(replies).map(([name, reply]) => [name, reply.status]))).toEqual({
      list: 200,
      create: 201,
      read: 200,
      anonymous: 401,
      forbidden: 403,
      unknownPath: 404,
      oauth: 200,
      withToken: 403,
      key: 404,
      place: 404,
      problemType: 200,
    });
  });

  it('GET /v1/audit-events: one event per request, allowed or refused, with who, what, which action, outcome, when and how long', () => {
    const admin = { caller_id: 1, caller_name: 'admin', credential: 'api_key' };
    const anonymous = { caller_id: null, caller_name: null, credential: null };
    const expected: Record<keyof typeof replies, Partial<AuditEvent>> = {
      list: {
        ...admin,
        method: 'GET',
        path: '/v1/users',
        resource: 'users',
        record_id: null,
        action: 'read',
        status: 200,
      },
      create: {
        ...admin,
        method: 'POST',
        path: '/v1/users',
        resource: 'users',
        record_id: null,
        action: 'create',
        status: 201,
      },
      read: {
        caller_id: editor.caller.id,
        caller_name: 'audit-editor',
        credential: 'api_key',
        method: 'GET',
        path: `/v1/users/${replies.create.json.id}`,
        resource: 'users',
        record_id: String(replies.create.json.id),
        action: 'read',
        status: 200,
      },
      anonymous: {
        ...anonymous,
        method: 'GET',
        path: '/v1/users',
        resource: 'users',
        record_id: null,
        action: 'read',
        status: 401,
      },
      forbidden: {
        caller_id: reader.caller.id,
        caller_name: 'audit-reader',
        credential: 'api_key',
        method: 'POST',
        path: '/v1/users',
        resource: 'users',
        record_id: null,
        action: 'create',
        status: 403,
      },
      unknownPath: {
        ...anonymous,
        method: 'GET',
        path: '/v1/nowhere',
        resource: null,
        record_id: null,
        action: 'read',
        status: 404,
      },
      oauth: {
        ...anonymous,
        method: 'POST',
        path: '/oauth/token',
        resource: null,
        record_id: null,
        action: 'create',
        status: 200,
      },
      withToken: {
        caller_id: editor.caller.id,
        caller_name: 'audit-editor',
        credential: 'oauth',
        method: 'DELETE',
        path: '/v1/users/999999',
        resource: 'users',
        record_id: '999999',
        action: 'delete',
        status: 403,
      },
      key: {
        ...admin,
        method: 'GET',
        path: `/v1/callers/${editor.caller.id}/keys/999998`,
        resource: 'callers',
        record_id: '999998',
        action: 'read',
        status: 404,
      },
      place: {
        ...admin,
        method: 'GET',
        path: '/v1/weather/nowhere-at-all',
        resource: 'weather',
        record_id: 'nowhere-at-all',
        action: 'read',
        status: 404,
      },
      problemType: {
        ...anonymous,
        method: 'GET',
        path: '/problems/not-found',
        resource: null,
        record_id: null,
        action: 'read',
        status: 200,
      },
    };
    for (const name of Object.keys(expected) as (keyof typeof replies)[]) {
      const event = eventOf(name);
      expect(event, name).toEqual({
        id: expect.any(Number),
        at: expect.any(String),
        request_id: requestIdOf(replies[name]),
        duration_ms: expect.any(Number),
        client_ip: '127.0.0.1',
        // No request here acts for a user (test/resources/acting.test.ts has those).
        user_id: null,
        ...expected[name],
      });
      expect(event.duration_ms, name).toBeGreaterThanOrEqual(0);
      expect(event.at >= started && event.at <= finished, `${name}: ${event.at} outside ${started}…${finished}`).toBe(
        true,
      );
      expect(
        events.filter((other) => other.request_id === event.request_id),
        name,
      ).toHaveLength(1);
    }
  });

  it('GET /v1/audit-events: newest first, by id and by arrival', () => {
    const ids = events.map((event) => event.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    const order = (Object.keys(replies) as (keyof typeof replies)[]).map((name) => eventOf(name).id);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    const ours = (Object.keys(replies) as (keyof typeof replies)[]).map((name) => eventOf(name).at);
    expect(ours).toEqual([...ours].sort());
  });

  it("GET /v1/audit-events?caller_id=: only that caller's requests", async () => {
    const reply = await test.call({ url: `/v1/audit-events?caller_id=${reader.caller.id}` });
    expect(reply.status).toBe(200);
    expect(reply.json.data.map((event: AuditEvent) => event.request_id)).toEqual([requestIdOf(replies.forbidden)]);
  });

  it('GET /v1/audit-events?resource=&action=&status=: only the requests that match all three', async () => {
    const reply = await test.call({ url: '/v1/audit-events?resource=users&action=create&status=403' });
    expect(reply.json.data.map((event: AuditEvent) => event.request_id)).toEqual([requestIdOf(replies.forbidden)]);
    const refused = await test.call({ url: '/v1/audit-events?status=401' });
    expect(refused.json.data.map((event: AuditEvent) => event.request_id)).toEqual([requestIdOf(replies.anonymous)]);
    const deletes = await test.call({ url: '/v1/audit-events?action=delete' });
    expect(deletes.json.data.map((event: AuditEvent) => event.request_id)).toEqual([requestIdOf(replies.withToken)]);
    const byResource = await test.call({ url: '/v1/audit-events?resource=users' });
    expect(byResource.json.data.every((event: AuditEvent) => event.resource === 'users')).toBe(true);
    expect(byResource.json.data).toHaveLength(6);
  });

  it('GET /v1/audit-events?after=&before=: only the requests that arrived strictly between', async () => {
    const after = eventOf('create').at;
    const before = eventOf('unknownPath').at;
    const reply = await test.call({ url: `/v1/audit-events?after=${after}&before=${before}` });
    expect(reply.json.data.map((event: AuditEvent) => event.request_id)).toEqual(
      [replies.forbidden, replies.anonymous, replies.read].map(requestIdOf),
    );
  });

  it('GET /v1/audit-events?limit=&cursor=: pages newest first without gaps or repeats, with a Link to the next page', async () => {
    const query = `after=${started}&before=${finished}`;
    const seen: string[] = [];
    let url = `/v1/audit-events?${query}&limit=3`;
    let pages = 0;
    for (;;) {
      const reply = await test.call({ url });
      expect(reply.status).toBe(200);
      expect(reply.json.data.length).toBeLessThanOrEqual(3);
      seen.push(...reply.json.data.map((event: AuditEvent) => event.request_id));
      pages++;
      if (reply.json.next_cursor === null) {
        expect(reply.headers.link).toBeUndefined();
        break;
      }
      // The Link repeats the request's own filters with the new cursor; it is followed as is.
      const link = /^<([^>]+)>; rel="next"$/.exec(String(reply.headers.link));
      expect(link).not.toBeNull();
      const next = new URL(link![1]!, 'http://rowi.test');
      expect(next.pathname).toBe('/v1/audit-events');
      expect(Object.fromEntries(next.searchParams)).toEqual({
        after: started,
        before: finished,
        limit: '3',
        cursor: reply.json.next_cursor,
      });
      url = link![1]!;
    }
    expect(pages).toBe(Math.ceil(Object.keys(replies).length / 3));
    expect(seen).toEqual(Object.values(replies).map(requestIdOf).reverse());
  });

  it('GET /v1/audit-events: 403 insufficient-scope for an editor', async () => {
    const reply = await test.call({ url: '/v1/audit-events', key: editor.key });
    expect(expectProblem(reply, 403, 'insufficient-scope').required_scopes).toEqual(['audit-events:read']);
  });

  it.each([
    ['status=abc', '#/status'],
    ['status=99', '#/status'],
    ['action=fly', '#/action'],
    ['caller_id=0', '#/caller_id'],
    ['after=yesterday', '#/after'],
    ['before=2024-13-01T00:00:00Z', '#/before'],
    ['limit=0', '#/limit'],
    ['cursor=not-a-cursor', '#/cursor'],
    ['sort=at', '#/sort'],
    ['client_ip=127.0.0.1', '#/client_ip'],
  ])('GET /v1/audit-events?%s: 400 invalid-query pointing at the parameter', async (query, pointer) => {
    const problem = expectProblem(await test.call({ url: `/v1/audit-events?${query}` }), 400, 'invalid-query');
    expect(problem.errors?.map((error) => error.pointer)).toContain(pointer);
  });
});

const countAuditEvents = async (test: TestApp) =>
  Number(
    (
      await test.storage.db
        .selectFrom('audit_events')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

describe('the audit trail is written in batches', () => {
  it('200 requests: nothing is written until the flush interval passes; closing the app writes all 200', async () => {
    const test = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '60000' });
    const count = () => countAuditEvents(test);
    const requestIds: string[] = [];
    for (let index = 0; index < 200; index++) {
      const reply = await test.call({ url: '/v1/users?limit=1' });
      expect(reply.status).toBe(200);
      requestIds.push(requestIdOf(reply));
    }
    const listed = await test.call({ url: '/v1/audit-events' });
    expect(listed.json.data).toEqual([]);
    expect(await count()).toBe(0);

    await test.app.close();
    try {
      const rows = await test.storage.db
        .selectFrom('audit_events')
        .select(['request_id', 'status', 'resource'])
        .orderBy('id')
        .execute();
      expect(rows).toHaveLength(201);
      expect(rows.slice(0, 200).map((row) => row.request_id)).toEqual(requestIds);
      expect(rows[200]).toEqual({ request_id: requestIdOf(listed), status: 200, resource: 'audit-events' });
    } finally {
      await test.storage.close();
    }
  });
});

describe('the audit trail when the database refuses a batch', () => {
  it('GET /health/ready: the audit_trail check warns, and the metrics count the events waiting, while the database refuses every batch; once it takes them again, none is lost and none written twice', async () => {
    const test = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '50' });
    try {
      // The table gone refuses every batch whole, as an unreachable database or a full disk does.
      await sql`alter table audit_events rename to audit_events_away`.execute(test.storage.db);
      const requestIds: string[] = [];
      for (let index = 0; index < 20; index++)
        requestIds.push(requestIdOf(await test.call({ url: '/v1/users?limit=1' })));
      // Several flushes fail meanwhile; requests are answered all the same.
      await sleep(300);
      const ready = await test.call({ url: '/health/ready', key: null });
      expect(ready.status).toBe(200);
      expect(ready.json.checks.audit_trail).toMatchObject({
        status: 'warn',
        output: expect.stringMatching(/^the audit trail could not be written for \d+ s; 2\d events wait in memory$/),
      });
      const metrics = (await test.call({ url: '/metrics' })).text;
      expect(sample(metrics, 'rowi_audit_events_pending')).toBeGreaterThanOrEqual(20);
      expect(sample(metrics, 'rowi_audit_write_failing_seconds')).toBeGreaterThan(0);

      await sql`alter table audit_events_away rename to audit_events`.execute(test.storage.db);
      const events = await waitForEvents(test, requestIds);
      for (const id of requestIds) expect(events.filter((event) => event.request_id === id)).toHaveLength(1);
      expect((await test.call({ url: '/health/ready', key: null })).json.checks.audit_trail).toBeUndefined();
      expect(sample((await test.call({ url: '/metrics' })).text, 'rowi_audit_write_failing_seconds')).toBe(0);
    } finally {
      await test.close();
    }
  });

  it('an event the database refuses for its values is logged whole and counted; the rest of its batch and every later one are written', async () => {
    const { log, logger } = keptLog('warn');
    const test = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '50' }, logger);
    try {
      // A row the database will never take, whatever is tried: a constraint on the path.
      if (BACKEND === 'sqlite') {
        await sql`create trigger refuse_poison before insert on audit_events when new.path = '/v1/poison' begin select raise(abort, 'poison refused'); end`.execute(
          test.storage.db,
        );
      } else {
        await sql`alter table audit_events add constraint refuse_poison check (path <> '/v1/poison')`.execute(
          test.storage.db,
        );
      }
      const setAsideBefore = sample((await test.call({ url: '/metrics' })).text, 'rowi_audit_events_set_aside_total');
      const before: string[] = [];
      for (let index = 0; index < 10; index++) before.push(requestIdOf(await test.call({ url: '/v1/users?limit=1' })));
      const poison = await test.call({ url: '/v1/poison' });
      expect(poison.status).toBe(404);
      const after: string[] = [];
      for (let index = 0; index < 10; index++) after.push(requestIdOf(await test.call({ url: '/v1/users?limit=1' })));

      const events = await waitForEvents(test, [...before, ...after]);
      expect(events.filter((event) => event.path === '/v1/poison')).toEqual([]);
      const setAside = log.filter((line) => line.audit_event !== undefined);
      expect(setAside).toHaveLength(1);
      expect(setAside[0]).toMatchObject({
        level: 50,
        audit_event: { request_id: requestIdOf(poison), path: '/v1/poison', status: 404 },
        msg: expect.stringMatching(
          /^an audit event was refused by the database \(.*\): it is kept in this log line instead$/,
        ),
      });
      expect(setAside[0]).not.toHaveProperty('err');
      const metrics = (await test.call({ url: '/metrics' })).text;
      expect(sample(metrics, 'rowi_audit_events_set_aside_total') - setAsideBefore).toBe(1);
      expect(sample(metrics, 'rowi_audit_write_failing_seconds')).toBe(0);
      expect(await countAuditEvents(test)).toBeGreaterThanOrEqual(20);
    } finally {
      await test.close();
    }
  });
});

describe.runIf(BACKEND === 'sqlite')('the audit trail of an in-memory database', () => {
  it('ROWI_DATA=:memory: writes on the request thread (no worker can open that database): closing the app writes every event', async () => {
    const test = await startApp({ ROWI_DATA: ':memory:', ROWI_AUDIT_FLUSH_INTERVAL: '60000' });
    const requestIds: string[] = [];
    for (let index = 0; index < 30; index++)
      requestIds.push(requestIdOf(await test.call({ url: '/v1/users?limit=1' })));
    await test.app.close();
    try {
      const rows = await test.storage.db
        .selectFrom('audit_events')
        .select(['request_id', 'at', 'resource', 'action'])
        .orderBy('id')
        .execute();
      expect(rows.map((row) => row.request_id)).toEqual(requestIds);
      expect(rows[0]).toMatchObject({ resource: 'users', action: 'read' });
      expect(rows[0]!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    } finally {
      await test.storage.close();
    }
  });
});
