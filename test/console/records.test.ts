import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing } from '../helpers/browser.js';
import {
  expectAccessible,
  expectClean,
  goTo,
  NARROW,
  screenshot,
  scrollsSideways,
  signedIn,
  startConsoleRig,
  WIDE,
  type ConsoleRig,
} from '../helpers/console.js';
import { createCallerThroughApi, createItem, createUser, setStock } from '../helpers/records.js';

let rig: ConsoleRig | undefined;

/** Thirty users for a list longer than a page (25). */
const PEOPLE = [
  'Ada Lovelace',
  'Grace Hopper',
  'Alan Turing',
  'Katherine Johnson',
  'Edsger Dijkstra',
  'Barbara Liskov',
  'Donald Knuth',
  'Margaret Hamilton',
  'John McCarthy',
  'Frances Allen',
  'Ken Thompson',
  'Radia Perlman',
  'Dennis Ritchie',
  'Hedy Lamarr',
  'Tim Berners-Lee',
  'Sophie Wilson',
  'Niklaus Wirth',
  'Adele Goldberg',
  'Tony Hoare',
  'Jean Sammet',
  'Leslie Lamport',
  'Shafi Goldwasser',
  'Bjarne Stroustrup',
  'Karen Spärck Jones',
  'Guido van Rossum',
  'Mary Kenneth Keller',
  'Linus Torvalds',
  'Evelyn Boyd Granville',
  'Vint Cerf',
  'Annie Easley',
];
const missing = browserMissing();

/** The rows of a table, by its caption (each Table is a region named by it). */
function rowsOf(page: Page, caption: string) {
  return page.getByRole('region', { name: caption, exact: true }).locator('tbody tr');
}

/** The console's address after `#`, and going to one (as a pasted link would). */
const hashOf = (page: Page) => page.evaluate<string>('location.hash');
const openHash = (page: Page, hash: string) => page.evaluate(`location.hash = ${JSON.stringify(hash)}`);

/** The text of a record's field in its dl.record. */
async function fieldOf(page: Page, section: string, term: string): Promise<string> {
  const panel = page.getByRole('region', { name: section, exact: true });
  const dt = panel.locator('dt', { hasText: new RegExp(`^${term}$`) });
  return (await dt.locator('xpath=following-sibling::dd[1]').textContent())!;
}

async function placeOrder(name: string, userId: number, lines: { item_id: number; quantity: number }[]) {
  const reply = await rig!.test.call({ method: 'POST', url: '/v1/orders', body: { name, user_id: userId, lines } });
  if (reply.status !== 201) throw new Error(`could not place order: ${reply.status} ${reply.text}`);
  return reply.json as { id: number; total: string };
}

describe.skipIf(missing !== undefined)('the console in Chromium: records (users, items and stock, orders)', () => {
  beforeAll(async () => {
    rig = await startConsoleRig();
  });
  afterAll(() => rig?.close());

  it('when there are more users than fit a page, then the list pages with Next and Previous, a search finds those holding its text, a filter by email finds one, and Enter on a row opens it', async () => {
    const made = [];
    for (const name of PEOPLE) {
      const email = `${name.toLowerCase().replace(/[^a-z]+/g, '.')}@example.com`;
      made.push((await createUser(rig!.test, { name, email })).user);
    }
    expect(made).toHaveLength(30);
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Users');
    const rows = rowsOf(page, 'Users');
    await expect.poll(() => rows.count()).toBe(25);
    const pager = page.getByRole('navigation', { name: 'Pages of users' });
    expect(await pager.getByRole('button', { name: 'Previous' }).isDisabled()).toBe(true);
    expect(await pager.textContent()).toContain('Page 1');
    await expectAccessible(tab, 'the users list at 1280 px');
    const firstPage = await rows.locator('td:nth-child(2)').allTextContents();

    await pager.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => pager.textContent()).toContain('Page 2');
    // The only users so far are these thirty: the second page holds the last five.
    await expect.poll(() => rows.count()).toBe(5);
    const secondPage = await rows.locator('td:nth-child(2)').allTextContents();
    for (const user of made) expect([...firstPage, ...secondPage]).toContain(user.name);
    expect(await pager.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await pager.getByRole('button', { name: 'Previous' }).click();
    await expect.poll(() => pager.textContent()).toContain('Page 1');
    await expect.poll(() => rows.locator('td:nth-child(2)').allTextContents()).toEqual(firstPage);

    // Search: any part of a name or email, any case, as GET /v1/users?q= answers; kept in the address.
    const filters = page.getByRole('search', { name: 'Filter users' });
    await filters.getByRole('searchbox', { name: 'Search' }).fill('OP');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => hashOf(page)).toContain('q=OP');
    const found = (await rig!.test.call({ url: '/v1/users?q=OP&limit=100' })).json.data as { name: string }[];
    expect(found.length).toBeGreaterThan(0);
    await expect.poll(() => rows.locator('td:nth-child(2)').allTextContents()).toEqual(found.map((user) => user.name));
    expect(found.map((user) => user.name)).toContain('Grace Hopper');
    await filters.getByRole('searchbox', { name: 'Search' }).fill('');

    // A filter the API offers (exact email, any case); it is kept in the address.
    const wanted = made[16]!;
    await filters.getByRole('textbox', { name: 'Email' }).fill(wanted.email.toUpperCase());
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain(wanted.name);
    expect(await hashOf(page)).toContain('email=');

    // The keyboard: the row's link takes the focus, Enter opens the record.
    await rows.first().getByRole('link', { name: wanted.name }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => hashOf(page)).toBe(`#/users/${wanted.id}`);
    await page.getByRole('heading', { level: 1, name: wanted.name }).waitFor();
    expect(await fieldOf(page, 'User', 'Email')).toBe(wanted.email);
    expect(await fieldOf(page, 'User', 'Created by')).toContain('caller #');
    await expectAccessible(tab, 'a user at 1280 px');
    expectClean(tab);
    await page.context().close();
  });

  it('when a user is changed, then the console shows the new values and says so, and the change is stored', async () => {
    const { user } = await createUser(rig!.test, { name: 'Before Change' });
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, `#/users/${user.id}`);
    const page = tab.page;
    await page.getByRole('heading', { level: 1, name: 'Before Change' }).waitFor();
    await page.getByRole('button', { name: 'Change', exact: true }).click();
    const form = page.getByRole('region', { name: 'Change user' });
    await form.getByLabel('Name').fill('After Change');
    await form.getByRole('textbox', { name: 'Email' }).fill(`after.${user.id}@example.com`);
    await form.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Changes saved');
    expect(await fieldOf(page, 'User', 'Name')).toBe('After Change');
    expect(await fieldOf(page, 'User', 'Email')).toBe(`after.${user.id}@example.com`);
    expect(await form.count()).toBe(0);
    const stored = await rig!.test.call({ url: `/v1/users/${user.id}` });
    expect(stored.json).toMatchObject({ name: 'After Change', email: `after.${user.id}@example.com` });
    expectClean(tab);
    await page.context().close();
  });

  it('when the user changed through the API after the console read it, then saving is refused and explained in words, Reload shows the new value, and saving again works', async () => {
    const { user } = await createUser(rig!.test, { name: 'Read By Console' });
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, `#/users/${user.id}`);
    const page = tab.page;
    await page.getByRole('heading', { level: 1, name: 'Read By Console' }).waitFor();
    await page.getByRole('button', { name: 'Change', exact: true }).click();
    const elsewhere = await rig!.test.call({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ name: 'Changed Elsewhere' }),
    });
    expect(elsewhere.status).toBe(200);

    const form = page.getByRole('region', { name: 'Change user' });
    await form.getByLabel('Name').fill('Changed In Console');
    await form.getByRole('button', { name: 'Save changes' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    const explained = (await alert.textContent())!;
    expect(explained).toContain('Someone changed this record after you opened it');
    expect(explained).not.toContain('{');
    expect(explained).not.toContain('"type"');
    expect((await rig!.test.call({ url: `/v1/users/${user.id}` })).json.name).toBe('Changed Elsewhere');

    await form.getByRole('button', { name: 'Reload' }).click();
    await expect.poll(() => fieldOf(page, 'User', 'Name')).toBe('Changed Elsewhere');
    await expect.poll(() => form.getByLabel('Name').inputValue()).toBe('Changed Elsewhere');
    expect(await form.getByRole('alert').count()).toBe(0);
    await form.getByLabel('Name').fill('Changed In Console');
    await form.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Changes saved');
    expect((await rig!.test.call({ url: `/v1/users/${user.id}` })).json.name).toBe('Changed In Console');
    expect(tab.errors.filter((error) => !/412/.test(error))).toEqual([]);
    expect(tab.dialogs).toEqual([]);
    await page.context().close();
  });

  it('when a user is deleted and the deletion confirmed, then the list says so and rowi answers 404 for it', async () => {
    const { user } = await createUser(rig!.test, { name: 'To Be Deleted' });
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, `#/users/${user.id}`);
    const page = tab.page;
    await page.getByRole('heading', { level: 1, name: 'To Be Deleted' }).waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    // Asked once more; Keep leaves it.
    await page.getByRole('button', { name: 'Keep' }).click();
    expect((await rig!.test.call({ url: `/v1/users/${user.id}` })).status).toBe(200);
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await expect.poll(() => hashOf(page)).toBe('#/users');
    await expect.poll(() => page.getByRole('status').textContent()).toContain(`User #${user.id} deleted`);
    expect((await rig!.test.call({ url: `/v1/users/${user.id}` })).status).toBe(404);
    expectClean(tab);
    await page.context().close();
  });

  it("when an item is opened, then its stock (on hand, reserved) and its movements show; setting the stock with its ETag is stored and adds a movement; the item's price changes", async () => {
    const { item } = await createItem(rig!.test, { name: 'Counted Widget', price: '4.25' });
    await setStock(rig!.test, item.id, 10);
    const { user } = await createUser(rig!.test);
    const order = await placeOrder('SO-STOCK', user.id, [{ item_id: item.id, quantity: 3 }]);

    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Items and stock');
    await page
      .getByRole('search', { name: 'Filter items' })
      .getByRole('searchbox', { name: 'Search' })
      .fill('Counted Widget');
    await page.getByRole('button', { name: 'Apply' }).click();
    const rows = rowsOf(page, 'Items');
    await expect.poll(() => rows.count()).toBe(1);
    // The list carries each item's stock.
    await expect.poll(() => rows.first().locator('td[data-label="On hand"]').textContent()).toBe('7');
    await rows.first().getByRole('link', { name: 'Counted Widget' }).click();
    await page.getByRole('heading', { level: 1, name: 'Counted Widget' }).waitFor();
    const stock = page.getByRole('region', { name: 'Stock', exact: true });
    await expect.poll(() => stock.locator('.stat').first().textContent()).toContain('7');
    expect(await stock.locator('.stat').nth(1).textContent()).toContain('3');

    const movements = rowsOf(page, 'Stock movements');
    await expect.poll(() => movements.count()).toBe(2);
    const newest = (await movements.first().textContent())!;
    expect(newest).toContain('reserved');
    expect(newest).toContain('−3');
    expect(
      await movements
        .first()
        .getByRole('link', { name: `order #${order.id}` })
        .getAttribute('href'),
    ).toBe(`#/orders/${order.id}`);
    expect(await movements.nth(1).textContent()).toContain('+10');

    await stock.getByLabel('Set on hand to').fill('20');
    await stock.getByRole('button', { name: 'Set stock' }).click();
    await expect.poll(() => stock.getByRole('status').textContent()).toContain('On hand set to 20');
    expect((await rig!.test.call({ url: `/v1/items/${item.id}/stock` })).json).toMatchObject({
      quantity: 20,
      reserved: 3,
    });
    await expect.poll(() => movements.count()).toBe(3);
    expect(await movements.first().textContent()).toContain('+13');

    // The movements by kind.
    await page.getByRole('region', { name: 'Stock movements', exact: true }).getByLabel('Kind').selectOption('set');
    await expect.poll(() => movements.count()).toBe(2);

    await page.getByRole('button', { name: 'Change', exact: true }).click();
    const form = page.getByRole('region', { name: 'Change item' });
    await form.getByLabel('Price').fill('4.75');
    await form.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => fieldOf(page, 'Item', 'Price')).toBe('4.75');
    expect((await rig!.test.call({ url: `/v1/items/${item.id}` })).json.price).toBe('4.75');
    expectClean(tab);
    await page.context().close();
  });

  it('when an order is opened, then its lines (item, quantity, price), total and user show; its lines change; cancelling it, confirmed, returns its stock', async () => {
    const { user } = await createUser(rig!.test, { name: 'Margaret Heafield', email: 'margaret.heafield@example.com' });
    const { item: cable } = await createItem(rig!.test, { name: 'USB-C cable', price: '9.90' });
    const { item: dock } = await createItem(rig!.test, { name: 'Docking station', price: '149.00' });
    await setStock(rig!.test, cable.id, 100);
    await setStock(rig!.test, dock.id, 12);
    const order = await placeOrder('SO-2041', user.id, [
      { item_id: dock.id, quantity: 1 },
      { item_id: cable.id, quantity: 3 },
    ]);
    expect(order.total).toBe('178.70');

    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Orders');
    await page.getByRole('search', { name: 'Filter orders' }).getByLabel('Status').selectOption('placed');
    await page.getByRole('search', { name: 'Filter orders' }).getByLabel('User id').fill(String(user.id));
    await page.getByRole('button', { name: 'Apply' }).click();
    const list = rowsOf(page, 'Orders');
    await expect.poll(() => list.count()).toBe(1);
    expect(await list.first().textContent()).toContain('Margaret Heafield');
    await list.first().getByRole('link', { name: 'SO-2041' }).click();

    await page.getByRole('heading', { level: 1, name: 'SO-2041' }).waitFor();
    const lines = rowsOf(page, 'Lines');
    await expect.poll(() => lines.first().textContent()).toContain('Docking station');
    expect(await lines.count()).toBe(2);
    const cableRow = lines.filter({ hasText: 'USB-C cable' });
    expect(await cableRow.locator('td[data-label="Quantity"]').textContent()).toBe('3');
    expect(await cableRow.locator('td[data-label="Unit price"]').textContent()).toBe('9.90');
    expect(await cableRow.locator('td[data-label="Line total"]').textContent()).toBe('29.70');
    expect(await cableRow.getByRole('link', { name: 'USB-C cable' }).getAttribute('href')).toBe(`#/items/${cable.id}`);
    expect(await fieldOf(page, 'Order', 'Total')).toBe('178.70');
    expect(await fieldOf(page, 'Order', 'Status')).toBe('placed');
    await expect.poll(() => fieldOf(page, 'Order', 'User')).toContain('Margaret Heafield');
    expect(
      await page
        .getByRole('region', { name: 'Order', exact: true })
        .getByRole('link', { name: 'Margaret Heafield' })
        .getAttribute('href'),
    ).toBe(`#/users/${user.id}`);
    await expectAccessible(tab, 'an order at 1280 px');
    await screenshot(tab, 'records-orders');

    // The lines change as a whole while the order is placed: 5 cables instead of 3.
    await page.getByRole('button', { name: 'Change lines' }).click();
    const linesForm = page.getByRole('form', { name: 'Change lines' });
    const groups = linesForm.getByRole('group');
    expect(await groups.count()).toBe(2);
    for (let index = 0; index < 2; index++) {
      const group = groups.nth(index);
      if ((await group.getByLabel('Item id').inputValue()) === String(cable.id))
        await group.getByLabel('Quantity').fill('5');
    }
    await linesForm.getByRole('button', { name: 'Save lines' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('the total is now 198.50');
    expect(await cableRow.locator('td[data-label="Quantity"]').textContent()).toBe('5');
    expect(await fieldOf(page, 'Order', 'Total')).toBe('198.50');
    const changed = await rig!.test.call({ url: `/v1/orders/${order.id}` });
    expect(changed.json.lines).toContainEqual(expect.objectContaining({ item_id: cable.id, quantity: 5 }));
    expect((await rig!.test.call({ url: `/v1/items/${cable.id}/stock` })).json).toMatchObject({
      quantity: 95,
      reserved: 5,
    });

    await page.getByRole('button', { name: 'Cancel order' }).click();
    await page.getByRole('button', { name: 'Yes, cancel order' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Order cancelled');
    expect(await fieldOf(page, 'Order', 'Status')).toBe('cancelled');
    expect(await page.getByRole('button', { name: 'Cancel order' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Change lines' }).count()).toBe(0);
    expect((await rig!.test.call({ url: `/v1/orders/${order.id}` })).json.status).toBe('cancelled');
    expect((await rig!.test.call({ url: `/v1/items/${dock.id}/stock` })).json).toMatchObject({
      quantity: 12,
      reserved: 0,
    });
    expectClean(tab);
    await page.context().close();
  });

  it('when an item is created in the console, then it opens, said created, and is stored; a refused price is explained; stock changed meanwhile is refused (412) and reloaded', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Items and stock');
    await page.getByRole('button', { name: 'New item' }).click();
    const form = page.getByRole('region', { name: 'New item' });
    await form.getByLabel('Name').fill('Walnut desk');
    await form.getByLabel('SKU').fill('DESK-WALNUT-140');
    await form.getByLabel('Price').fill('12.345');
    await form.getByRole('button', { name: 'Create' }).click();
    const refused = form.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('Not created');
    expect(await refused.textContent()).toContain('/price');
    await form.getByLabel('Price').fill('389.00');
    await form.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('heading', { level: 1, name: 'Walnut desk' }).waitFor();
    expect(await page.getByRole('status').first().textContent()).toContain('Item created');
    const id = Number((await hashOf(page)).split('/').at(-1));
    expect((await rig!.test.call({ url: `/v1/items/${id}` })).json).toMatchObject({
      name: 'Walnut desk',
      sku: 'DESK-WALNUT-140',
      price: '389.00',
    });

    // The stock is its own record with its own ETag: set by someone else after the console read it.
    const stock = page.getByRole('region', { name: 'Stock', exact: true });
    await expect.poll(() => stock.locator('.stat').first().textContent()).toContain('0');
    await setStock(rig!.test, id, 30);
    await stock.getByLabel('Set on hand to').fill('25');
    await stock.getByRole('button', { name: 'Set stock' }).click();
    await stock.getByRole('alert').waitFor();
    expect(await stock.getByRole('alert').textContent()).toContain('Someone changed this record');
    expect((await rig!.test.call({ url: `/v1/items/${id}/stock` })).json.quantity).toBe(30);
    await stock.getByRole('button', { name: 'Reload' }).click();
    await expect.poll(() => stock.locator('.stat').first().textContent()).toContain('30');
    await stock.getByLabel('Set on hand to').fill('25');
    await stock.getByRole('button', { name: 'Set stock' }).click();
    await expect.poll(() => stock.getByRole('status').textContent()).toContain('On hand set to 25');
    expect((await rig!.test.call({ url: `/v1/items/${id}/stock` })).json.quantity).toBe(25);
    expect(tab.errors.filter((error) => !/4(12|22)/.test(error))).toEqual([]);
    expect(tab.dialogs).toEqual([]);
    await page.context().close();
  });

  it('when an order is marked fulfilled, confirmed, then its status says so, its reserved stock has left, and it can no longer be cancelled', async () => {
    const { user } = await createUser(rig!.test, { name: 'Fulfilled Customer' });
    const { item } = await createItem(rig!.test, { name: 'Oak shelf' });
    await setStock(rig!.test, item.id, 8);
    const order = await placeOrder('SO-FULFIL', user.id, [{ item_id: item.id, quantity: 2 }]);
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, `#/orders/${order.id}`);
    const page = tab.page;
    await page.getByRole('heading', { level: 1, name: 'SO-FULFIL' }).waitFor();
    await page.getByRole('button', { name: 'Mark fulfilled' }).click();
    await page.getByRole('button', { name: 'Yes, mark fulfilled' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Order fulfilled');
    expect(await fieldOf(page, 'Order', 'Status')).toBe('fulfilled');
    for (const name of ['Cancel order', 'Mark fulfilled', 'Change lines'])
      expect(await page.getByRole('button', { name, exact: true }).count(), name).toBe(0);
    expect((await rig!.test.call({ url: `/v1/orders/${order.id}` })).json.status).toBe('fulfilled');
    expect((await rig!.test.call({ url: `/v1/items/${item.id}/stock` })).json).toMatchObject({
      quantity: 6,
      reserved: 0,
    });
    expectClean(tab);
    await page.context().close();
  });

  it('when a reader signs in, then records show but no control to create, change, delete, set stock or cancel', async () => {
    const reader = await createCallerThroughApi(rig!.test, 'records-reader', { role: 'reader' });
    const { user } = await createUser(rig!.test, { name: 'Seen By Reader' });
    const { item } = await createItem(rig!.test, { name: 'Seen Item' });
    await setStock(rig!.test, item.id, 5);
    const order = await placeOrder('SO-READER', user.id, [{ item_id: item.id, quantity: 1 }]);
    const tab = await signedIn(rig!, reader.key);
    const page = tab.page;

    await goTo(tab, 'Users');
    await expect.poll(() => rowsOf(page, 'Users').count()).toBeGreaterThan(0);
    expect(await page.getByRole('button', { name: 'New user' }).count()).toBe(0);
    const noControls = async () => {
      for (const name of ['Change', 'Change lines', 'Delete', 'Set stock', 'Cancel order', 'Mark fulfilled'])
        expect(await page.getByRole('button', { name, exact: true }).count(), name).toBe(0);
    };
    await openHash(page, `#/users/${user.id}`);
    await page.getByRole('heading', { level: 1, name: 'Seen By Reader' }).waitFor();
    await noControls();
    await openHash(page, `#/items/${item.id}`);
    await page.getByRole('heading', { level: 1, name: 'Seen Item' }).waitFor();
    await expect.poll(() => rowsOf(page, 'Stock movements').count()).toBe(2);
    await noControls();
    await openHash(page, `#/orders/${order.id}`);
    await page.getByRole('heading', { level: 1, name: 'SO-READER' }).waitFor();
    await expect.poll(() => rowsOf(page, 'Lines').count()).toBe(1);
    await noControls();
    expectClean(tab);
    await page.context().close();
  });

  it('when records hold markup and a javascript: URL as names, then lists and records show them as text: nothing runs, no image, no javascript: link', async () => {
    const markup = '<img src=x onerror=alert(1)>';
    const scheme = 'javascript:alert(1)';
    const { user } = await createUser(rig!.test, { name: markup });
    const { item } = await createItem(rig!.test, { name: scheme });
    await setStock(rig!.test, item.id, 2);
    const order = await placeOrder('<script>alert(2)</script>', user.id, [{ item_id: item.id, quantity: 1 }]);
    expect((await rig!.test.call({ url: `/v1/users/${user.id}` })).json.name).toBe(markup);
    expect((await rig!.test.call({ url: `/v1/items/${item.id}` })).json.name).toBe(scheme);

    const tab = await signedIn(rig!);
    const page = tab.page;
    const nothingRan = async () => {
      expect(tab.dialogs).toEqual([]);
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('script:not([src])').count()).toBe(0);
      expect(await page.locator('a[href^="javascript:" i]').count()).toBe(0);
      expect(await page.locator('[onerror]').count()).toBe(0);
    };

    await goTo(tab, 'Users');
    await page.getByRole('search', { name: 'Filter users' }).getByRole('searchbox', { name: 'Search' }).fill(markup);
    await page.getByRole('button', { name: 'Apply' }).click();
    const userLink = rowsOf(page, 'Users').getByRole('link', { name: markup, exact: true });
    await userLink.waitFor();
    expect(await userLink.textContent()).toBe(markup);
    expect(await userLink.getAttribute('href')).toBe(`#/users/${user.id}`);
    await nothingRan();
    await userLink.click();
    await page.getByRole('heading', { level: 1, name: markup }).waitFor();
    expect(await fieldOf(page, 'User', 'Name')).toBe(markup);
    await nothingRan();

    await goTo(tab, 'Items and stock');
    await page.getByRole('search', { name: 'Filter items' }).getByRole('searchbox', { name: 'Search' }).fill(scheme);
    await page.getByRole('button', { name: 'Apply' }).click();
    const itemLink = rowsOf(page, 'Items').getByRole('link', { name: scheme, exact: true });
    await itemLink.waitFor();
    expect(await itemLink.getAttribute('href')).toBe(`#/items/${item.id}`);
    await nothingRan();
    await itemLink.click();
    await page.getByRole('heading', { level: 1, name: scheme }).waitFor();
    expect(await fieldOf(page, 'Item', 'Name')).toBe(scheme);
    await nothingRan();

    await openHash(page, `#/orders/${order.id}`);
    await page.getByRole('heading', { level: 1, name: '<script>alert(2)</script>' }).waitFor();
    const orderPanel = page.getByRole('region', { name: 'Order', exact: true });
    await orderPanel.getByRole('link', { name: markup, exact: true }).waitFor();
    expect(await orderPanel.getByRole('link', { name: markup, exact: true }).getAttribute('href')).toBe(
      `#/users/${user.id}`,
    );
    await expect.poll(() => rowsOf(page, 'Lines').first().getByRole('link').textContent()).toBe(scheme);
    expect(await rowsOf(page, 'Lines').first().getByRole('link').getAttribute('href')).toBe(`#/items/${item.id}`);
    await nothingRan();
    await goTo(tab, 'Orders');
    await rowsOf(page, 'Orders').getByRole('link', { name: '<script>alert(2)</script>' }).waitFor();
    await nothingRan();
    expectClean(tab);
    await page.context().close();
  });

  it('at 390 px wide: the orders list and an order do not scroll sideways, and axe finds nothing serious', async () => {
    const { user } = await createUser(rig!.test, { name: 'Narrow Customer With A Rather Long Name' });
    const { item } = await createItem(rig!.test, { name: 'An item whose name is long enough to wrap on a phone' });
    await setStock(rig!.test, item.id, 50);
    const order = await placeOrder('SO-NARROW-0001', user.id, [{ item_id: item.id, quantity: 2 }]);
    const tab = await signedIn(rig!, rig!.test.adminKey, NARROW);
    const page = tab.page;
    await goTo(tab, 'Orders');
    await expect.poll(() => rowsOf(page, 'Orders').count()).toBeGreaterThan(0);
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'the orders list at 390 px');
    await openHash(page, `#/orders/${order.id}`);
    await page.getByRole('heading', { level: 1, name: 'SO-NARROW-0001' }).waitFor();
    await expect.poll(() => rowsOf(page, 'Lines').first().textContent()).toContain('long enough');
    await page.getByRole('button', { name: 'Change', exact: true }).click();
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'an order, its change form open, at 390 px');
    await openHash(page, `#/items/${item.id}`);
    await expect.poll(() => rowsOf(page, 'Stock movements').count()).toBe(2);
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'an item at 390 px');
    expectClean(tab);
    await page.context().close();
  });
});
