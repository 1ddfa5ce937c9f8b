import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FileChooser, Page } from 'playwright-core';
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
import { createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * The console's imports, exports and operations (console/src/sections/files/): a file uploaded
 * by the file input, by drag and drop and by the keyboard, followed live to its end, its refused rows,
 * a cancel; exports downloaded as files. Backups: backups.test.ts (they run alone).
 */
let rig: ConsoleRig | undefined;
const missing = browserMissing();

/** Orders placed a minute: low, so an orders import waits for its budget, long enough to be cancelled. */
const ORDERS_A_MINUTE = 60;

const statusOf = (page: Page) => page.getByRole('region', { name: 'Status' }).locator('.badge').textContent();

/** The operation's id, from the address the console went to after an upload. */
async function operationShown(page: Page): Promise<number> {
  await expect.poll(() => page.evaluate(() => location.hash)).toMatch(/^#\/imports\/\d+$/);
  return Number((await page.evaluate(() => location.hash)).split('/').at(-1));
}

describe.skipIf(missing !== undefined)('the console in Chromium: imports and exports', { timeout: 90_000 }, () => {
  beforeAll(async () => {
    rig = await startConsoleRig({
      ROWI_IMPORT_DIRECTORY: join(tempFolder('console-imports'), 'spool'),
      ROWI_RATE_LIMIT_ORDERS_CREATE: String(ORDERS_A_MINUTE),
    });
  });
  afterAll(() => rig?.close());

  it('when a CSV of items is chosen with the file input and checked as a dry run, then the summary says nothing was stored and rowi has none; uploaded for real, then the progress reaches its end and the items are stored', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Imports');
    const rows = Array.from({ length: 300 }, (_, index) => `DRY-${index},Dry widget ${index},1.25,${index % 7}`);
    const file = {
      name: 'catalogue.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from(`sku,name,price,quantity\n${rows.join('\n')}\n`),
    };

    await page.getByLabel('Collection').selectOption('items');
    await page.getByLabel('Dry run: check every row, store nothing').check();
    await page.getByLabel('File', { exact: true }).setInputFiles(file);
    expect(await page.getByLabel('Format').inputValue()).toBe('text/csv');
    await page.getByRole('button', { name: 'Upload and check' }).click();
    const dry = await operationShown(page);
    await expect.poll(() => statusOf(page), { timeout: 30_000 }).toBe('succeeded');
    const summary = page.getByRole('region', { name: 'Summary' });
    expect(await summary.textContent()).toContain('A dry run: nothing was stored.');
    expect(await summary.textContent()).toContain('No row was committed.');
    expect(await page.getByRole('region', { name: 'Status' }).textContent()).toContain('Rows that would be stored300');
    const none = await rig!.test.call({ url: '/v1/items?sku=DRY-1' });
    expect(none.json.data).toEqual([]);
    expect((await rig!.test.call({ url: `/v1/operations/${dry}` })).json.options.dry_run).toBe(true);

    // Back to the form: the same file, for real.
    await page.getByRole('link', { name: 'All imports' }).click();
    await page.getByLabel('Collection').selectOption('items');
    await page.getByLabel('File', { exact: true }).setInputFiles(file);
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    const real = await operationShown(page);
    expect(real).not.toBe(dry);
    await expect.poll(() => statusOf(page), { timeout: 30_000 }).toBe('succeeded');
    const progress = page.locator('progress');
    expect(await progress.getAttribute('value')).toBe(await progress.getAttribute('max'));
    expect(await progress.getAttribute('aria-label')).toContain('100 % of the file read');
    expect(await page.getByRole('region', { name: 'Summary' }).textContent()).toContain(
      "The file's rows 2 to 301 were committed",
    );
    const stored = await rig!.test.call({ url: '/v1/items?sku=DRY-7' });
    expect(stored.json.data).toMatchObject([{ sku: 'DRY-7', name: 'Dry widget 7', price: '1.25' }]);
    const operation = (await rig!.test.call({ url: `/v1/operations/${real}` })).json;
    expect(operation).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 300, rows_failed: 0 } });

    // The recent operations list both, linked.
    await page.getByRole('link', { name: 'All imports' }).click();
    const list = page.getByRole('region', { name: 'Recent operations' });
    await list.getByRole('link', { name: `Import ${real}` }).waitFor();
    expect(await list.getByRole('link', { name: `Import ${dry}` }).count()).toBe(1);
    expect(await list.textContent()).toContain('(dry run)');
    expectClean(tab);
    await page.context().close();
  });

  it('when an NDJSON file of users with bad rows is dropped on the drop zone in partial mode, then the good rows are stored and the refused rows table shows their row numbers, fields and details', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Imports');
    const lines = [
      { name: 'Ada Lovelace', email: 'ada@console.example' },
      { name: 'No email' },
      { name: 'Grace Hopper', email: 'grace@console.example' },
      { name: 'Bad email', email: 'not an email' },
      { name: 'Ada again', email: 'ADA@console.example' },
    ];
    const text = `${lines.map((line) => JSON.stringify(line)).join('\n')}\n{"name": broken\n`;
    await page.getByLabel('Collection').selectOption('users');
    await page.getByLabel('Mode').selectOption('partial');

    const dataTransfer = await page.evaluateHandle((content) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([content], 'people.ndjson', { type: '' }));
      return transfer;
    }, text);
    await page.dispatchEvent('.drop', 'dragenter', { dataTransfer });
    await page.dispatchEvent('.drop', 'dragover', { dataTransfer });
    await expect.poll(() => page.locator('.drop.over').count()).toBe(1);
    await page.dispatchEvent('.drop', 'drop', { dataTransfer });
    await expect.poll(() => page.locator('.drop.over').count()).toBe(0);
    await page.getByText('people.ndjson').waitFor();
    // The media type comes from the file's name.
    expect(await page.getByLabel('Format').inputValue()).toBe('application/x-ndjson');
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    const id = await operationShown(page);
    await expect.poll(() => statusOf(page), { timeout: 30_000 }).toBe('succeeded');

    const refused = page.getByRole('region', { name: 'Refused rows' }).getByRole('table');
    await expect.poll(() => refused.locator('tbody tr').count()).toBe(4);
    const cells = await refused
      .locator('tbody tr')
      .evaluateAll((rows) => rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent ?? '')));
    expect(cells.map((row) => row[0])).toEqual(['2', '4', '5', '6']);
    expect(cells[0]![1]).toBe('email');
    expect(cells[1]![1]).toBe('email');
    expect(cells[2]![2]).toBe('duplicate-in-file');
    expect(cells[3]![1]).toBe('the whole row');
    expect(cells[3]![2]).toBe('malformed-row');
    for (const row of cells) expect(row[3]!.length).toBeGreaterThan(5);
    // What the table shows is what rowi has.
    const errors = await rig!.test.call({
      url: `/v1/operations/${id}/errors`,
      headers: { accept: 'application/json' },
    });
    expect(errors.json.data.map((error: { row: number }) => String(error.row))).toEqual(['2', '4', '5', '6']);
    expect(errors.json.data[1].detail).toBe(cells[1]![3]);
    const stored = await rig!.test.call({ url: '/v1/users?email=grace@console.example' });
    expect(stored.json.data).toHaveLength(1);

    await expectAccessible(tab, 'an operation with refused rows at 1280 px');
    await screenshot(tab, 'imports-errors');
    expectClean(tab);
    await page.context().close();
  });

  it('when a long import runs, then its progress shows live, and Cancel (confirmed) stops it: the status says cancelled and rowi kept no order of it', async () => {
    const { user } = await createUser(rig!.test);
    const { item } = await createItem(rig!.test);
    await setStock(rig!.test, item.id, 100_000);
    // More orders than the budget allows at once: the import waits for it, row by row, for minutes.
    const lines = Array.from({ length: 20_000 }, (_, index) =>
      JSON.stringify({ name: `LONG-${index}`, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] }),
    );
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Imports');
    await page.getByLabel('Collection').selectOption('orders');
    await page.getByLabel('Mode').selectOption('partial');
    // Orders have no natural key: no choice of what a taken key does.
    expect(await page.getByLabel('When the key is taken').count()).toBe(0);
    await page.getByLabel('File', { exact: true }).setInputFiles({
      name: 'orders.jsonl',
      mimeType: 'application/jsonl',
      buffer: Buffer.from(`${lines.join('\n')}\n`),
    });
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    const id = await operationShown(page);
    await expect.poll(() => statusOf(page), { timeout: 30_000 }).toBe('running');
    // Live: the page reads the operation again while it runs.
    const reads = page.waitForRequest((request) => request.url().endsWith(`/v1/operations/${id}`));
    await reads;
    expect(await page.locator('progress').count()).toBe(1);

    await page.getByRole('button', { name: 'Cancel the import' }).click();
    await page.getByRole('button', { name: 'Yes, cancel the import' }).click();
    await expect.poll(() => statusOf(page), { timeout: 30_000 }).toBe('cancelled');
    expect(await page.getByRole('status').allTextContents()).toContain('Cancelled.');
    expect(await page.getByRole('button', { name: 'Cancel the import' }).count()).toBe(0);
    const operation = (await rig!.test.call({ url: `/v1/operations/${id}` })).json;
    expect(operation.status).toBe('cancelled');
    const orders = await rig!.test.call({ url: `/v1/orders?user_id=${user.id}&limit=500` });
    expect(orders.json.data.length).toBe(operation.summary.rows_committed);

    // Once it has ended the page stops reading it.
    let later = 0;
    page.on('request', (request) => {
      if (request.url().endsWith(`/v1/operations/${id}`)) later++;
    });
    await page.waitForTimeout(2500);
    expect(later).toBe(0);
    expectClean(tab);
    await page.context().close();
  });

  it('with the keyboard alone: choose a file, upload it and follow it to its end', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Imports');
    await page.getByLabel('Collection').focus();
    await page.keyboard.press('ArrowDown'); // users → items
    expect(await page.getByLabel('Collection').inputValue()).toBe('items');
    const input = page.getByLabel('File', { exact: true });
    // Space on the focused file input opens the chooser. On a loaded machine a press can come
    // before the page takes it: the press is made again (at most three times), always by keyboard.
    let chooser: FileChooser | undefined;
    for (let attempt = 0; attempt < 3 && chooser === undefined; attempt++) {
      await input.focus();
      await expect.poll(() => input.evaluate((element) => element === document.activeElement)).toBe(true);
      const opened = page.waitForEvent('filechooser', { timeout: 8_000 }).catch(() => undefined);
      await page.keyboard.press('Space');
      chooser = await opened;
    }
    expect(chooser, 'Space on the file input opens the file chooser').toBeDefined();
    await chooser!.setFiles({
      name: 'keys.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from('sku,name,price\nKEY-1,Keyboard,9.99\n'),
    });
    await page.getByText('keys.csv').waitFor();
    // Tab from the file input through Format to Upload, then Enter.
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Upload');
    await page.keyboard.press('Enter');
    await operationShown(page);
    await expect.poll(() => statusOf(page), { timeout: 30_000 }).toBe('succeeded');
    expect((await rig!.test.call({ url: '/v1/items?sku=KEY-1' })).json.data).toHaveLength(1);
    expectClean(tab);
    await page.context().close();
  });

  it('when a file is refused at once (a header lacking a required column), then the form explains the problem and no operation is made', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Imports');
    const before = (await rig!.test.call({ url: '/v1/operations?limit=500' })).json.data.length;
    await page.getByLabel('Collection').selectOption('users');
    await page
      .getByLabel('File', { exact: true })
      .setInputFiles({ name: 'bad.csv', mimeType: 'text/csv', buffer: Buffer.from('name\nNo email column\n') });
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    const alert = page.getByRole('alert');
    await expect.poll(() => alert.textContent()).toContain('The file was not accepted');
    expect(await alert.textContent()).toContain('email');
    expect(await page.evaluate(() => location.hash)).toBe('#/imports');
    expect((await rig!.test.call({ url: '/v1/operations?limit=500' })).json.data.length).toBe(before);
    await page.context().close();
  });

  it('at 1280 and 390 px: the imports page and an operation page pass axe, and at 390 px the page does not scroll sideways', async () => {
    const posted = await rig!.test.call({
      method: 'POST',
      url: '/v1/items/import?mode=partial',
      headers: { 'content-type': 'text/csv' },
      body: 'sku,name,price\nNARROW-1,A rather long item name that must wrap on a narrow screen,3.00\nNARROW-2,,x\n',
    });
    expect(posted.status).toBe(202);
    const id = posted.json.id as number;
    for (const viewport of [WIDE, NARROW]) {
      const tab = await signedIn(rig!, rig!.test.adminKey, viewport);
      const page = tab.page;
      await goTo(tab, 'Imports');
      await page.getByRole('region', { name: 'Recent operations' }).getByRole('link').first().waitFor();
      await expectAccessible(tab, `the imports page at ${viewport.width} px`);
      if (viewport === NARROW) expect(await scrollsSideways(tab)).toBe(false);
      await page.evaluate((operation) => (location.hash = `#/imports/${operation}`), id);
      await expect.poll(() => statusOf(page)).toBe('succeeded');
      await page.getByRole('region', { name: 'Refused rows' }).getByRole('table').locator('tbody tr').first().waitFor();
      await expectAccessible(tab, `an operation page at ${viewport.width} px`);
      if (viewport === NARROW) expect(await scrollsSideways(tab)).toBe(false);
      expectClean(tab);
      await page.context().close();
    }
  });

  it('when users are exported as CSV and as NDJSON, then the downloaded files hold every user, as the API lists them', async () => {
    await createUser(rig!.test, { name: '=SUM(A1:A2)', email: 'formula@export.example' });
    const listed = (await rig!.test.call({ url: '/v1/users?limit=500&sort=id' })).json.data as {
      id: number;
      email: string;
    }[];
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Exports');
    await page.getByLabel('Collection').selectOption('users');
    await page.getByRole('radio', { name: /^CSV/ }).check();
    const [csv] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download' }).click(),
    ]);
    expect(csv.suggestedFilename()).toMatch(/^users-\d{4}-\d{2}-\d{2}\.csv$/);
    const csvText = readFileSync((await csv.path())!, 'utf8');
    const csvLines = csvText.trim().split(/\r?\n/);
    expect(csvLines[0]).toMatch(/^id,name,email,/);
    expect(csvLines).toHaveLength(listed.length + 1);
    expect(csvText).toContain("'=SUM(A1:A2)");
    for (const user of listed) expect(csvText).toContain(user.email);
    await page.getByRole('status').filter({ hasText: 'Saved users-' }).waitFor();

    await page.getByRole('radio', { name: /^NDJSON/ }).check();
    const [ndjson] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download' }).click(),
    ]);
    expect(ndjson.suggestedFilename()).toMatch(/^users-\d{4}-\d{2}-\d{2}\.ndjson$/);
    const records = readFileSync((await ndjson.path())!, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: number; email: string });
    expect(records.map((record) => [record.id, record.email])).toEqual(listed.map((user) => [user.id, user.email]));

    // A filter the export honours: created after now selects none.
    await page.getByLabel('Created after').fill('2999-01-01T00:00');
    const [empty] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download' }).click(),
    ]);
    expect(readFileSync((await empty.path())!, 'utf8')).toBe('');
    await expectAccessible(tab, 'the exports page');
    expectClean(tab);
    await page.context().close();
  });

  it('when this rowi has no backup folder, then the backups page explains that ROWI_BACKUP_DIR is not set and offers no backup', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Backups');
    const note = page.getByRole('note');
    await expect.poll(() => note.textContent()).toContain('ROWI_BACKUP_DIR');
    expect(await page.getByRole('button', { name: 'Take a backup' }).isDisabled()).toBe(true);
    await expectAccessible(tab, 'the backups page without a folder');
    expectClean(tab);
    await page.context().close();
  });
});
