import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { createItem, createUser, setStock } from '../helpers/records.js';

/**
 * The CSV export of every collection that holds text a caller writes (docs/reading.md "CSV"):
 * names made through the API to be run by a spreadsheet once it has trimmed them are exported with
 * a single quote in front.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0' });
});
afterAll(() => test.close());

const csv = { accept: 'text/csv' };

/** The column `column` of the export of `path`, read back by a CSV parser. */
async function exported(path: string, column: string): Promise<string[]> {
  const reply = await test.call({ url: path, headers: csv });
  expect(reply.status).toBe(200);
  const [header, ...rows] = parse(reply.text) as string[][];
  const at = header!.indexOf(column);
  return rows.map((row) => row[at]!);
}

describe('CSV exports: the formula guard on every collection', () => {
  it('GET /v1/users, /v1/items, /v1/orders as text/csv: a name that starts with spaces (ASCII, no-break, ideographic) and then a sign, or with a small or full-width sign, starts with a single quote', async () => {
    const user = (await createUser(test, { name: ' =1+1', email: 'formula@example.com' })).user;
    const item = (await createItem(test, { name: '\u00a0@SUM(A1)' })).item;
    await createItem(test, { name: '\ufe66HYPERLINK("http://x.invalid")' });
    await createItem(test, { name: 'Plain name' });
    await setStock(test, item.id, 5);
    const order = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: '\u3000+cmd', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    expect(order.status, order.text).toBe(201);

    expect(await exported('/v1/users', 'name')).toContain("' =1+1");
    expect(await exported('/v1/items', 'name')).toEqual(
      expect.arrayContaining(["'\u00a0@SUM(A1)", '\'\ufe66HYPERLINK("http://x.invalid")', 'Plain name']),
    );
    expect(await exported('/v1/orders', 'name')).toContain("'\u3000+cmd");
  });
});
