import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';

/**
 * The audit trail's filters of method, path (and the paths below it), record id and status class,
 * alone, together with the others and across pages. The trail is arranged as rows of its table (the
 * paths a test needs, `%` and `_` among them, cannot all be asked for through the router); the
 * app records only writes and refusals, a minute apart, so the reads of the tests add nothing to it.
 */
interface Arranged {
  method: string;
  path: string;
  status: number;
  resource?: string;
  record_id?: string;
  caller_id?: number;
}

const TRAIL = {
  readOrder: { method: 'GET', path: '/v1/orders/12', status: 200, resource: 'orders', record_id: '12' },
  cancelOrder: { method: 'POST', path: '/v1/orders/12/cancel', status: 200, resource: 'orders', record_id: '12' },
  otherOrder: { method: 'GET', path: '/v1/orders/123', status: 404, resource: 'orders', record_id: '123' },
  listOrders: { method: 'GET', path: '/v1/orders', status: 200, resource: 'orders' },
  staleChange: {
    method: 'PATCH',
    path: '/v1/orders/12',
    status: 412,
    resource: 'orders',
    record_id: '12',
    caller_id: 7,
  },
  otherCase: { method: 'GET', path: '/v1/Orders/12', status: 404 },
  wildPlace: { method: 'GET', path: '/v1/weather/50%_off', status: 200, resource: 'weather', record_id: '50%_off' },
  longerPlace: { method: 'GET', path: '/v1/weather/50%_offer', status: 200, resource: 'weather' },
  likePlace: { method: 'GET', path: '/v1/weather/50xXoff/history', status: 200, resource: 'weather' },
  belowWildPlace: { method: 'DELETE', path: '/v1/weather/50%_off/observations', status: 503, resource: 'weather' },
  backslashPlace: { method: 'GET', path: '/v1/weather/a\\b/history', status: 200, resource: 'weather' },
  plainPlace: { method: 'GET', path: '/v1/weather/ab/history', status: 200, resource: 'weather' },
  readUser: { method: 'GET', path: '/v1/users/7', status: 500, resource: 'users', record_id: '7' },
  preflight: { method: 'OPTIONS', path: '/v1/users', status: 204 },
  moved: { method: 'GET', path: '/v1/users/', status: 308 },
} satisfies Record<string, Arranged>;
type Name = keyof typeof TRAIL;

/** The arranged requests arrived a second apart from an hour ago: well inside the trail's retention, which prunes older ones. */
const ARRANGED_FROM = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
const instant = (seconds: number) => new Date(ARRANGED_FROM + seconds * 1000).toISOString();

describe('GET /v1/audit-events: filters of method, path, record id and status class', () => {
  let test: TestApp;
  const idOf = {} as Record<Name, number>;
  const nameOf = new Map<number, Name>();

  /** The names of the events a query lists, in the order listed. */
  async function listed(query: string): Promise<Name[]> {
    const reply = await test.call({ url: `/v1/audit-events?${query}` });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json.next_cursor).toBeNull();
    return (reply.json.data as { id: number }[]).map((event) => nameOf.get(event.id)!);
  }

  /** The names, newest first, as the trail lists them. */
  const newestFirst = (...names: Name[]) => [...names].sort((a, b) => idOf[b] - idOf[a]);

  beforeAll(async () => {
    test = await startApp({ ROWI_AUDIT_READS: 'false', ROWI_AUDIT_FLUSH_INTERVAL: '60000' });
    let second = 0;
    for (const [name, arranged] of Object.entries(TRAIL) as [Name, Arranged][]) {
      const row = await test.storage.db
        .insertInto('audit_events')
        .values({
          at: new Date(ARRANGED_FROM + 1000 * second++).toISOString(),
          request_id: `arranged-${name}`,
          caller_id: arranged.caller_id ?? 1,
          caller_name: 'admin',
          credential: 'api_key',
          user_id: null,
          method: arranged.method,
          path: arranged.path,
          resource: arranged.resource ?? null,
          record_id: arranged.record_id ?? null,
          action: null,
          status: arranged.status,
          duration_ms: 1,
          client_ip: '127.0.0.1',
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      idOf[name] = Number(row.id);
      nameOf.set(Number(row.id), name);
    }
  });

  afterAll(async () => {
    await test.close();
  });

  it('GET /v1/audit-events?method=: only the requests of that method', async () => {
    expect(await listed('method=POST')).toEqual(['cancelOrder']);
    expect(await listed('method=OPTIONS')).toEqual(['preflight']);
    expect(await listed('method=PUT')).toEqual([]);
  });

  it('GET /v1/audit-events?path=: the path and those below it, on segment boundaries, case-sensitive', async () => {
    expect(await listed('path=/v1/orders/12')).toEqual(newestFirst('readOrder', 'cancelOrder', 'staleChange'));
    expect(await listed('path=/v1/orders')).toEqual(
      newestFirst('readOrder', 'cancelOrder', 'otherOrder', 'listOrders', 'staleChange'),
    );
    expect(await listed('path=/v1/orders/12/cancel')).toEqual(['cancelOrder']);
    expect(await listed('path=/v1/ord')).toEqual([]);
  });

  it('GET /v1/audit-events?path=: a path ending in / finds the paths below it; / finds every request', async () => {
    expect(await listed('path=/v1/orders/')).toEqual(
      newestFirst('readOrder', 'cancelOrder', 'otherOrder', 'staleChange'),
    );
    expect(await listed('path=/v1/users/')).toEqual(newestFirst('readUser', 'moved'));
    expect(await listed('path=/&limit=500')).toHaveLength(Object.keys(TRAIL).length);
  });

  it('GET /v1/audit-events?path=: %, _ and \\ in the path stand for themselves, not for other characters', async () => {
    // %25 is the query string's escape of %: the filter is /v1/weather/50%_off.
    expect(await listed('path=/v1/weather/50%25_off')).toEqual(newestFirst('wildPlace', 'belowWildPlace'));
    expect(await listed('path=/v1/weather/a%5Cb')).toEqual(['backslashPlace']);
    expect(await listed('path=/v1/weather/_b')).toEqual([]);
    expect(await listed('path=/v1/weather/%25')).toEqual([]);
  });

  it('GET /v1/audit-events?record_id=: only the requests that addressed that record, compared as text', async () => {
    expect(await listed('record_id=12')).toEqual(newestFirst('readOrder', 'cancelOrder', 'staleChange'));
    expect(await listed('record_id=50%25_off')).toEqual(['wildPlace']);
    expect(await listed('record_id=012')).toEqual([]);
  });

  it('GET /v1/audit-events?status_class=: only the requests answered in that class; status= is still exact', async () => {
    expect(await listed('status_class=4xx')).toEqual(newestFirst('otherOrder', 'staleChange', 'otherCase'));
    expect(await listed('status_class=5xx')).toEqual(newestFirst('belowWildPlace', 'readUser'));
    expect(await listed('status_class=3xx')).toEqual(['moved']);
    expect(await listed('status_class=2xx&resource=orders')).toEqual(
      newestFirst('readOrder', 'cancelOrder', 'listOrders'),
    );
    expect(await listed('status=404')).toEqual(newestFirst('otherOrder', 'otherCase'));
    expect(await listed('status=404&status_class=4xx')).toEqual(newestFirst('otherOrder', 'otherCase'));
    expect(await listed('status=404&status_class=2xx')).toEqual([]);
  });

  it('GET /v1/audit-events: the new filters combine with each other and with the others (all must match)', async () => {
    expect(await listed('path=/v1/orders&method=GET&status_class=2xx')).toEqual(newestFirst('readOrder', 'listOrders'));
    expect(await listed('record_id=12&method=PATCH&caller_id=7')).toEqual(['staleChange']);
    expect(await listed('record_id=12&caller_id=1&path=/v1/orders/12/cancel')).toEqual(['cancelOrder']);
    expect(await listed('path=/v1/weather&status_class=5xx&resource=weather')).toEqual(['belowWildPlace']);
    expect(await listed(`path=/v1/orders&after=${instant(0.5)}&before=${instant(2.5)}`)).toEqual(
      newestFirst('cancelOrder', 'otherOrder'),
    );
    expect(await listed(`path=/v1/orders&id=${idOf.readOrder},${idOf.readUser}`)).toEqual(['readOrder']);
  });

  it('GET /v1/audit-events?path=&limit=&cursor=: pages of only the filtered requests, newest first, without gaps or repeats, following Link', async () => {
    const seen: Name[] = [];
    let url = '/v1/audit-events?path=/v1/orders&status_class=2xx&limit=1';
    for (let pages = 1; ; pages++) {
      const reply = await test.call({ url });
      expect(reply.status).toBe(200);
      seen.push(...(reply.json.data as { id: number }[]).map((event) => nameOf.get(event.id)!));
      if (reply.json.next_cursor === null) {
        expect(pages).toBe(3);
        break;
      }
      const link = /^<([^>]+)>; rel="next"$/.exec(String(reply.headers.link));
      const next = new URL(link![1]!, 'http://rowi.test');
      expect(Object.fromEntries(next.searchParams)).toEqual({
        path: '/v1/orders',
        status_class: '2xx',
        limit: '1',
        cursor: reply.json.next_cursor,
      });
      url = link![1]!;
    }
    expect(seen).toEqual(newestFirst('readOrder', 'cancelOrder', 'listOrders'));
  });

  it('GET /v1/audit-events as CSV and NDJSON, and HEAD: the export takes the same filters', async () => {
    const csv = await test.call({
      url: '/v1/audit-events?path=/v1/weather/50%25_off&method=DELETE',
      headers: { accept: 'text/csv' },
    });
    expect(csv.status).toBe(200);
    expect(csv.mediaType).toBe('text/csv');
    const lines = csv.text.trim().split(/\r?\n/);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('/v1/weather/50%_off/observations');
    const ndjson = await test.call({
      url: '/v1/audit-events?record_id=12&status_class=4xx',
      headers: { accept: 'application/x-ndjson' },
    });
    expect(ndjson.status).toBe(200);
    const records = ndjson.text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: number });
    expect(records.map((record) => nameOf.get(record.id))).toEqual(['staleChange']);
    const head = await test.call({
      method: 'HEAD',
      url: '/v1/audit-events?method=GET&path=/v1/orders&status_class=4xx',
    });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it.each([
    ['method=get', 'method', /must be one of \["GET","HEAD","POST","PUT","PATCH","DELETE","OPTIONS"\]/],
    ['method=TRACE', 'method', /must be one of/],
    ['path=v1/orders', 'path', /must be a path that starts with \/ \(no query string\), at most 2048 characters/],
    ['path=/v1/orders%3Fstatus%3D1', 'path', /must be a path that starts with \//],
    ['path=', 'path', /must not be empty|must be a path/],
    [`path=/${'a'.repeat(2048)}`, 'path', /at most 2048 characters/],
    ['record_id=', 'record_id', /must not be empty/],
    [`record_id=${'1'.repeat(257)}`, 'record_id', /at most 256 characters/],
    ['status_class=6xx', 'status_class', /must be one of \["2xx","3xx","4xx","5xx"\]/],
    ['status_class=4XX', 'status_class', /must be one of/],
    ['status_class=4', 'status_class', /must be one of/],
    ['status=4xx', 'status', /must be an integer/],
  ])('GET /v1/audit-events?%s: 400 invalid-query naming the parameter', async (query, parameter, detail) => {
    const reply = await test.call({ url: `/v1/audit-events?${query}` });
    const problem = expectProblem(reply, 400, 'invalid-query');
    const error = problem.errors?.find((each) => each.pointer === `#/${parameter}`);
    expect(error, reply.text).toBeDefined();
    expect(error!.detail).toMatch(detail);
  });
});
