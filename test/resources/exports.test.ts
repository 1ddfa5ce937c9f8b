import { connect, type Socket } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { BACKEND } from '../helpers/database.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';

/** Exports (docs/reading.md): a list asked for as CSV or NDJSON answers the whole filtered collection. */
let test: TestApp;
const SEEDED = 2100; // five chunks of 500 (http/export.ts), the last one short
const TRICKY = ['=HYPERLINK("http://x.invalid","y")', '+1', '-2', '@SUM(A1)', '\tx', '\rx', 'a "b", c\nd', 'ü €'];

/** RFC 4180 rows (quoted fields, doubled quotes, CRLF), parsed strictly enough to catch a wrong quote. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let index = 0;
  let quoted = false;
  while (index < text.length) {
    const char = text[index]!;
    if (quoted) {
      if (char === '"' && text[index + 1] === '"') {
        field += '"';
        index += 2;
        continue;
      }
      if (char === '"') quoted = false;
      else field += char;
      index++;
      continue;
    }
    if (char === '"' && field === '') quoted = true;
    else if (char === ',') {
      row.push(field);
      field = '';
    } else if (char === '\r' && text[index + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      index++;
    } else field += char;
    index++;
  }
  expect(field, 'the last record ends with CRLF').toBe('');
  expect(row).toEqual([]);
  return rows;
}

beforeAll(async () => {
  // Load shedding off: the seeding below runs SQLite's inserts in this process, which on a busy
  // machine holds the event loop past ROWI_MAX_EVENT_LOOP_DELAY (the shedding has tests of its own).
  test = await startApp({ ROWI_EXPORT_STALL_TIMEOUT: '300', ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  // Set-based seeding, not the API: thousands of rows in a few statements. The API refuses a tab
  // or a carriage return in a name; what is stored is neutralised whatever it holds.
  const now = new Date().toISOString();
  const tricky = TRICKY.map((name, n) => {
    const email = `tricky${n}@example.com`;
    return { name, email, email_key: email, created_by: null, version: 1, created_at: now, updated_at: now };
  });
  await test.storage.db.insertInto('users').values(tricky).execute();
  for (let start = 0; start < SEEDED; start += 500) {
    const rows = Array.from({ length: Math.min(500, SEEDED - start) }, (_, offset) => {
      const n = start + offset;
      const email = `seeded${n}@example.com`;
      return {
        name: `seeded ${String(n).padStart(5, '0')}`,
        email,
        email_key: email,
        created_by: null,
        version: 1,
        created_at: now,
        updated_at: now,
      };
    });
    await test.storage.db.insertInto('users').values(rows).execute();
  }
});
afterAll(() => test.close());

const csv = { accept: 'text/csv' };
const ndjson = { accept: 'application/x-ndjson' };

describe('GET /v1/users as an export', () => {
  it('GET /v1/users: every user in CSV, in chunks, with a header row, when Accept is text/csv', async () => {
    const reply = await test.call({ url: '/v1/users', headers: csv });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/csv; charset=utf-8; header=present');
    expect(reply.headers['content-disposition']).toBe('attachment; filename="users.csv"');
    expect(reply.headers.etag).toBeUndefined();
    expect(reply.headers.link).toBeUndefined();
    const rows = parseCsv(reply.text);
    expect(rows[0]).toEqual(['id', 'name', 'email', 'created_by', 'created_at', 'updated_at']);
    const ids = rows.slice(1).map((row) => Number(row[0]));
    const stored = await test.storage.db.selectFrom('users').select('id').orderBy('id').execute();
    expect(ids).toEqual(stored.map((row) => row.id));
    expect(ids.length).toBeGreaterThanOrEqual(SEEDED + TRICKY.length);
  });

  it('GET /v1/users: text that a spreadsheet would run as a formula starts with a single quote, the rest is quoted as RFC 4180 says', async () => {
    const reply = await test.call({ url: '/v1/users?sort=id&created_before=2999-01-01T00:00:00Z', headers: csv });
    const names = parseCsv(reply.text)
      .slice(1, TRICKY.length + 1)
      .map((row) => row[1]);
    expect(names).toEqual([
      `'=HYPERLINK("http://x.invalid","y")`,
      "'+1",
      "'-2",
      "'@SUM(A1)",
      "'\tx",
      "'\rx",
      'a "b", c\nd',
      'ü €',
    ]);
    expect(reply.text).toContain('"a ""b"", c\nd"');
    expect(parseCsv(reply.text)[1]![3], 'null is an empty cell').toBe('');
  });

  it('GET /v1/users: NDJSON holds the same records as the JSON pages, with the same filters and sort', async () => {
    const url = '/v1/users?sort=-name&created_after=2000-01-01T00:00:00Z';
    const exported = await test.call({ url, headers: ndjson });
    expect(exported.status).toBe(200);
    expect(exported.headers['content-type']).toBe('application/x-ndjson');
    const lines = exported.text.split('\n');
    expect(lines.pop()).toBe('');
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const paged: unknown[] = [];
    let next: string | undefined = `${url}&limit=500`;
    while (next) {
      const page = await test.call({ url: next });
      paged.push(...page.json.data);
      next = page.json.next_cursor ? `${url}&limit=500&cursor=${page.json.next_cursor}` : undefined;
    }
    expect(records).toEqual(paged);
    expect(Object.keys(records[0]!)).toEqual(['id', 'name', 'email', 'created_by', 'created_at', 'updated_at']);
  });

  it('GET /v1/users: XML stays a page, and a filter that selects nothing exports only the header row', async () => {
    const xml = await test.call({ url: '/v1/users?limit=2', headers: { accept: 'application/xml' } });
    expect(xml.status).toBe(200);
    expect(xml.text.match(/<user>/g)).toHaveLength(2);
    const none = await test.call({ url: '/v1/users?email=nobody@example.com', headers: csv });
    expect(none.text).toBe('id,name,email,created_by,created_at,updated_at\r\n');
    const empty = await test.call({ url: '/v1/users?email=nobody@example.com', headers: ndjson });
    expect(empty.status).toBe(200);
    expect(empty.text).toBe('');
  });

  it('GET /v1/users: a bad query is a JSON problem, and Accept: text/csv on a read of one record is 406', async () => {
    expectProblem(await test.call({ url: '/v1/users?sort=nope', headers: csv }), 400, 'invalid-query');
    const one = await test.call({ url: '/v1/users/1', headers: csv });
    expectProblem(one, 406, 'not-acceptable');
  });
});

describe('exports of the other collections', () => {
  it('GET /v1/orders: a CSV row per line with the order repeated, and NDJSON with the lines nested', async () => {
    const { user } = await createUser(test);
    const [{ item: first }, { item: second }] = [await createItem(test, { price: '1.25' }), await createItem(test)];
    await setStock(test, first.id, 10);
    await setStock(test, second.id, 10);
    const placed = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: {
        name: '=cmd',
        user_id: user.id,
        lines: [
          { item_id: first.id, quantity: 2 },
          { item_id: second.id, quantity: 1 },
        ],
      },
    });
    expect(placed.status).toBe(201);
    const reply = await test.call({ url: `/v1/orders?user_id=${user.id}`, headers: csv });
    const [header, ...rows] = parseCsv(reply.text);
    expect(header).toEqual([
      'id',
      'name',
      'user_id',
      'status',
      'lines.item_id',
      'lines.quantity',
      'lines.unit_price',
      'lines.line_total',
      'total',
      'created_by',
      'created_at',
      'updated_at',
    ]);
    expect(rows.map((row) => row.slice(0, 8))).toEqual([
      [String(placed.json.id), "'=cmd", String(user.id), 'placed', String(first.id), '2', '1.25', '2.50'],
      [String(placed.json.id), "'=cmd", String(user.id), 'placed', String(second.id), '1', '2.50', '2.50'],
    ]);
    const lines = await test.call({ url: `/v1/orders?user_id=${user.id}`, headers: ndjson });
    expect(JSON.parse(lines.text)).toEqual(placed.json);
  });

  it('GET /v1/items/{id}/stock/movements, /v1/events and /v1/audit-events: exports too', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const movements = await test.call({ url: `/v1/items/${item.id}/stock/movements`, headers: csv });
    expect(movements.status).toBe(200);
    expect(parseCsv(movements.text)[1]).toContain('set');
    const events = await test.call({ url: '/v1/events?limit=1', headers: ndjson });
    expect(events.status).toBe(200);
    expect(events.text.split('\n').length).toBeGreaterThan(2);
    expect(events.headers['content-disposition']).toBe('attachment; filename="events.ndjson"');
    const audit = await test.call({ url: '/v1/audit-events', headers: csv });
    expect(audit.status).toBe(200);
    expect(parseCsv(audit.text)[0]![0]).toBe('id');
  });

  it('GET /v1/users: an export holds only the records the caller may see', async () => {
    const created = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'exporting-shop', role: 'editor', record_access: { users: 'own', items: 'own', orders: 'own' } },
    });
    const key = (await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} })).json.key;
    const own = await test.call({
      method: 'POST',
      url: '/v1/users',
      key,
      body: { name: 'mine', email: 'mine@example.com' },
    });
    const exported = await test.call({ url: '/v1/users', key, headers: ndjson });
    expect(
      exported.text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).id),
    ).toEqual([own.json.id]);
  });
});

describe('bounds of an export', () => {
  it('GET /v1/users: 422 export-too-large before anything is sent when more than ROWI_EXPORT_MAX_ROWS match; an export that starts at a cursor past the first is served', async () => {
    const small = await startApp({ ROWI_EXPORT_MAX_ROWS: '2' });
    try {
      for (const name of ['a', 'b', 'c']) await createUser(small, { name });
      const refused = await small.call({ url: '/v1/users', headers: csv });
      const problem = expectProblem(refused, 422, 'export-too-large');
      expect(problem).toMatchObject({ max_rows: 2 });
      const page = await small.call({ url: '/v1/users?limit=1' });
      const after = await small.call({ url: `/v1/users?cursor=${page.json.next_cursor}`, headers: ndjson });
      expect(after.status).toBe(200);
      expect(after.text.trim().split('\n')).toHaveLength(2);
    } finally {
      await small.close();
    }
  });

  it('GET /v1/users: a client that stops reading holds no read open, and is cut off after ROWI_EXPORT_STALL_TIMEOUT', async () => {
    // More than the kernel's socket buffers hold (several MB on loopback), so the export must wait.
    const later = new Date(Date.now() + 60_000).toISOString();
    const long = 'x'.repeat(190);
    for (let start = 0; start < 40_000; start += 500) {
      const rows = Array.from({ length: 500 }, (_, offset) => {
        const email = `bulky${start + offset}@example.com`;
        return {
          name: `${long} ${start + offset}`,
          email,
          email_key: email,
          created_by: null,
          version: 1,
          created_at: later,
          updated_at: later,
        };
      });
      await test.storage.db.insertInto('users').values(rows).execute();
    }
    await test.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = test.app.server.address() as { port: number };
    const socket: Socket = connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    const received: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {});
    // Read the first bytes, then stop reading: the export waits on its client with nothing open.
    await new Promise<void>((resolve) => {
      socket.once('data', (data) => {
        received.push(data);
        socket.pause();
        resolve();
      });
      socket.write(
        `GET /v1/users?created_after=${encodeURIComponent(new Date(Date.now() + 1000).toISOString())} HTTP/1.1\r\nhost: x\r\naccept: text/csv\r\nx-api-key: ${test.adminKey}\r\n\r\n`,
      );
    });
    if (BACKEND === 'sqlite') {
      // A write after the export began, then a checkpoint: a read held open since before the
      // write would keep the checkpoint from copying the write's frames back.
      const changed = await test.call({ method: 'PATCH', url: '/v1/users/1', body: { name: 'changed meanwhile' } });
      expect(changed.status).toBe(200);
      const connection = await openSqliteFile(test.config.data, { busyTimeoutMs: 1000 });
      try {
        const checkpoint = connection.get<{ log: number; checkpointed: number }>('pragma wal_checkpoint(PASSIVE)');
        expect(checkpoint?.checkpointed).toBe(checkpoint?.log);
      } finally {
        connection.close();
      }
    } else {
      // Only the export's reads count: transactions waiting with a lock on this app's users table
      // (rowi's own background work may be between two statements of a short transaction of its
      // own at this moment, and other test files use users tables of their own schemas).
      const open = await sql<{
        count: string;
      }>`select count(*) as count from pg_locks l join pg_stat_activity a on a.pid = l.pid where l.relation = 'users'::regclass and a.state like 'idle in transaction%'`.execute(
        test.storage.db,
      );
      expect(Number(open.rows[0]?.count)).toBe(0);
    }
    // Long past the stall time-out, the client reads again: what is left in the buffers, then the end.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    socket.on('data', (data: Buffer) => received.push(data));
    socket.resume();
    await closed;
    const text = Buffer.concat(received).toString('latin1');
    expect(text.startsWith('HTTP/1.1 200 OK')).toBe(true);
    expect(text.endsWith('\r\n0\r\n\r\n'), 'the chunked body never ends: the export was cut off').toBe(false);
    expect(text.length).toBeLessThan(40_000 * 200);
  });
});
