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
  type ConsoleTab,
} from '../helpers/console.js';
import { createCallerThroughApi } from '../helpers/records.js';

let rig: ConsoleRig | undefined;
const missing = browserMissing();

/** The caller as stored, read through the API as the admin. */
async function storedCaller(id: number) {
  const reply = await rig!.test.call({ url: `/v1/callers/${id}` });
  return { status: reply.status, caller: reply.json };
}

/** The id of the caller whose page the tab shows (`#/callers/7` → 7). */
async function shownCallerId(tab: ConsoleTab): Promise<number> {
  await expect.poll(() => tab.page.evaluate(() => location.hash)).toMatch(/^#\/callers\/\d+/);
  return Number((await tab.page.evaluate(() => location.hash)).match(/^#\/callers\/(\d+)/)![1]);
}

async function openCaller(tab: ConsoleTab, id: number, name: string): Promise<void> {
  await tab.page.evaluate((to) => (location.hash = to), `#/callers/${id}`);
  await tab.page.getByRole('heading', { level: 1, name }).waitFor();
}

describe.skipIf(missing !== undefined)('the console: callers and keys', () => {
  beforeAll(async () => {
    rig = await startConsoleRig();
  });
  afterAll(() => rig?.close());

  it('when the admin creates a caller (reader, an extra scope, a removed scope, own users), then it is stored as asked; changing its role is stored too', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Callers and keys');
    await page.getByRole('link', { name: 'New caller' }).click();
    await page.getByRole('heading', { level: 1, name: 'New caller' }).waitFor();

    await page.getByLabel(/^Name/).fill('reporting');
    await page.getByLabel(/^Role/).selectOption('reader');
    await page
      .getByRole('group', { name: 'Record access' })
      .getByLabel(/^users/)
      .selectOption('own');
    await page.locator('summary', { hasText: 'Extra scopes' }).click();
    await page.getByRole('group', { name: 'Extra scopes: orders', exact: true }).getByLabel('orders:delete').check();
    // Caller management comes only with the admin role: it is not offered as an extra scope.
    expect(await page.getByRole('group', { name: 'Extra scopes: callers', exact: true }).count()).toBe(0);
    await page.locator('summary', { hasText: 'Removed scopes' }).click();
    await page.getByRole('group', { name: 'Removed scopes: weather', exact: true }).getByLabel('weather:read').check();
    expect(await page.locator('summary', { hasText: 'Extra scopes' }).textContent()).toBe(
      'Extra scopes: orders:delete',
    );
    await expectAccessible(tab, 'the new caller form at 1280 px');
    await page.getByRole('button', { name: 'Create the caller' }).click();

    // The caller's page: what was stored, and the scopes it adds up to.
    await page.getByRole('heading', { level: 1, name: 'reporting' }).waitFor();
    expect(await page.getByRole('status').first().textContent()).toContain('was created');
    const id = await shownCallerId(tab);
    const { caller } = await storedCaller(id);
    expect(caller).toMatchObject({
      name: 'reporting',
      role: 'reader',
      extra_scopes: ['orders:delete'],
      removed_scopes: ['weather:read'],
      record_access: { users: 'own', items: 'all', orders: 'all' },
      rate_limit: null,
    });
    const details = page.getByRole('region', { name: 'The caller', exact: true });
    expect(await details.textContent()).toContain('users: its own only');
    const held = page.getByRole('region', { name: /^Scopes it holds/ });
    expect(await held.textContent()).toContain('orders:delete');
    expect(await held.textContent()).not.toContain('weather:read');
    expect(await held.textContent()).toContain('users:read');

    // Change its role: a new role brings its own record access unless one is chosen again.
    const change = page.getByRole('form', { name: 'Change the caller' });
    await change.getByLabel(/^Role/).selectOption('editor');
    expect(
      await change
        .getByRole('group', { name: 'Record access' })
        .getByLabel(/^users/)
        .inputValue(),
    ).toBe('default');
    await change.getByRole('button', { name: 'Save the changes' }).click();
    await expect
      .poll(() => page.getByRole('status').allTextContents())
      .toContainEqual(expect.stringContaining('Saved'));
    await expect.poll(async () => (await storedCaller(id)).caller.role).toBe('editor');
    expect((await storedCaller(id)).caller).toMatchObject({
      extra_scopes: ['orders:delete'],
      removed_scopes: ['weather:read'],
      record_access: { users: 'all', items: 'all', orders: 'all' },
    });
    await expect.poll(() => details.textContent()).toContain('editor');

    // Saving the form unchanged changes nothing and says so.
    await page
      .getByRole('form', { name: 'Change the caller' })
      .getByRole('button', { name: 'Save the changes' })
      .click();
    await page.getByText('Nothing to change').waitFor();

    // The list: the caller, its role and record access.
    await createCallerThroughApi(rig!.test, 'web-shop', { role: 'channel' });
    await createCallerThroughApi(rig!.test, 'warehouse', { role: 'editor', extra_scopes: ['orders:delete'] });
    await goTo(tab, 'Callers and keys');
    const list = page.getByRole('region', { name: 'Callers' });
    await expect.poll(() => list.textContent()).toContain('reporting');
    expect(await list.getByRole('row', { name: /web-shop/ }).textContent()).toContain('its own users, orders');
    await page.getByLabel(/^Role/).selectOption('channel');
    await expect.poll(() => list.textContent()).not.toContain('reporting');
    expect(await list.textContent()).toContain('web-shop');
    await list.getByRole('link', { name: 'web-shop' }).click();
    await page.getByRole('heading', { level: 1, name: 'web-shop' }).waitFor();
    expectClean(tab);
    await page.context().close();
  });

  it('when a key is issued, then it is shown once with a copy button and the warning; it works, its last use shows, and once revoked rowi refuses it', async () => {
    const target = await createCallerThroughApi(rig!.test, 'key-holder', { role: 'reader' });
    const tab = await signedIn(rig!);
    const page = tab.page;
    await openCaller(tab, target.id, 'key-holder');
    const keys = page.getByRole('region', { name: 'Keys of key-holder' });
    await expect.poll(() => keys.getByRole('row').count()).toBe(2);

    const issue = page.getByRole('form', { name: 'Issue a key' });
    await issue.getByLabel(/^Description/).fill('reporting production');
    await issue.getByRole('button', { name: 'Issue a key' }).click();
    const box = page.getByRole('region', { name: 'The new key' });
    await box.waitFor();
    expect(await box.textContent()).toContain('Copy it now: rowi does not show it again.');
    const key = (await box.locator('code').textContent())!;
    expect(key).toMatch(/^rowi_[a-z0-9]{8}_/);
    await expect.poll(() => keys.getByRole('row').count()).toBe(3);
    // The page from its top: the caller, its scopes and, below, the new key.
    await page.evaluate(() => scrollTo(0, 0));
    await screenshot(tab, 'callers-key');
    await expectAccessible(tab, "a caller's page with a new key, at 1280 px");

    await box.getByRole('button', { name: 'Copy the key' }).click();
    await box.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);

    // The key works against the API.
    const me = await rig!.test.call({ url: '/v1/callers/me', key });
    expect(me.status).toBe(200);
    expect(me.json.name).toBe('key-holder');

    // Away and back: the key is not shown again, anywhere.
    await goTo(tab, 'Health');
    await goTo(tab, 'Callers and keys');
    await page.getByRole('link', { name: 'key-holder' }).click();
    await page.getByRole('heading', { level: 1, name: 'key-holder' }).waitFor();
    await expect.poll(() => keys.getByRole('row').count()).toBe(3);
    expect(await page.getByRole('region', { name: 'The new key' }).count()).toBe(0);
    expect(await page.locator('body').textContent()).not.toContain(key);

    // Its last use shows once recorded (within a few seconds).
    const prefix = key.slice(0, 13);
    const row = keys.getByRole('row', { name: new RegExp(prefix) });
    expect(await row.textContent()).toContain('never');
    expect(await row.textContent()).toContain('reporting production');
    await expect
      .poll(
        async () => {
          await page.getByRole('button', { name: 'Refresh the keys' }).click();
          return (await row.getByRole('cell').nth(3).textContent()) ?? '';
        },
        { timeout: 20_000, interval: 1000 },
      )
      .not.toBe('never');

    // Revoke it: asked once more, then rowi refuses the key.
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByRole('button', { name: 'Yes, revoke' }).click();
    await expect
      .poll(() => page.getByRole('status').allTextContents())
      .toContainEqual(expect.stringContaining('revoked'));
    await expect.poll(() => row.textContent()).toContain('revoked');
    expect((await rig!.test.call({ url: '/v1/callers/me', key })).status).toBe(401);
    expect(await row.getByRole('button', { name: 'Revoke' }).count()).toBe(0);

    // Dismissing a new key hides it at once.
    await issue.getByRole('button', { name: 'Issue a key' }).click();
    await box.waitFor();
    await box.getByRole('button', { name: /hide it/ }).click();
    expect(await box.count()).toBe(0);
    expectClean(tab);
    await page.context().close();
  });

  it('when a caller is deleted, then the list says so and rowi has it no more; deleting the last admin is refused and explained', async () => {
    const doomed = await createCallerThroughApi(rig!.test, 'retired-system', { role: 'editor' });
    const tab = await signedIn(rig!);
    const page = tab.page;
    await openCaller(tab, doomed.id, 'retired-system');
    await page.getByRole('button', { name: 'Delete caller' }).click();
    await page.getByRole('button', { name: 'Yes, delete caller' }).click();
    await page.getByRole('heading', { level: 1, name: 'Callers and keys' }).waitFor();
    expect(await page.getByRole('status').first().textContent()).toContain(`Caller #${doomed.id} was deleted`);
    expect((await storedCaller(doomed.id)).status).toBe(404);
    expect((await rig!.test.call({ url: '/v1/callers/me', key: doomed.key })).status).toBe(401);

    const admin = (await rig!.test.call({ url: '/v1/callers/me' })).json;
    await openCaller(tab, admin.caller_id, admin.name);
    await page.getByRole('button', { name: 'Delete caller' }).click();
    await page.getByRole('button', { name: 'Yes, delete caller' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('The caller was not deleted');
    expect(await alert.textContent()).toContain('last caller that can manage callers');
    expect(await page.getByText('rowi always keeps one caller that can manage callers').isVisible()).toBe(true);
    expect((await storedCaller(admin.caller_id)).status).toBe(200);
    expectClean(tab);
    await page.context().close();
  });

  it('when someone else changed the caller after the page was opened, then saving is refused (412) and explained, and nothing is overwritten', async () => {
    const target = await createCallerThroughApi(rig!.test, 'contested', { role: 'reader' });
    const tab = await signedIn(rig!);
    const page = tab.page;
    await openCaller(tab, target.id, 'contested');
    const change = page.getByRole('form', { name: 'Change the caller' });
    await change.getByLabel(/^Rate limit/).fill('300');
    const meanwhile = await rig!.test.call({
      method: 'PATCH',
      url: `/v1/callers/${target.id}`,
      body: { rate_limit: 900 },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(meanwhile.status).toBe(200);
    await change.getByRole('button', { name: 'Save the changes' }).click();
    const alert = change.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('Someone changed this record after you opened it');
    expect((await storedCaller(target.id)).caller.rate_limit).toBe(900);
    // Read again, the form shows what is stored now.
    await change.getByRole('button', { name: 'Read the caller again' }).click();
    await expect
      .poll(() =>
        page
          .getByRole('form', { name: 'Change the caller' })
          .getByLabel(/^Rate limit/)
          .inputValue(),
      )
      .toBe('900');
    expectClean(tab);
    await page.context().close();
  });

  it('when the key may read callers but not change them, then the console offers no New caller, Change, Delete, Issue or Revoke', async () => {
    // Caller management cannot be granted to another role, so: an admin whose other callers:* are removed.
    const auditor = await createCallerThroughApi(rig!.test, 'auditor', {
      role: 'admin',
      removed_scopes: ['callers:create', 'callers:update', 'callers:delete'],
    });
    const tab = await signedIn(rig!, auditor.key);
    const page = tab.page;
    await goTo(tab, 'Callers and keys');
    const list = page.getByRole('region', { name: 'Callers' });
    await expect.poll(() => list.textContent()).toContain('auditor');
    expect(await page.getByRole('link', { name: 'New caller' }).count()).toBe(0);
    await list.getByRole('link', { name: 'auditor' }).click();
    await page.getByRole('heading', { level: 1, name: 'auditor' }).waitFor();
    const keys = page.getByRole('region', { name: 'Keys of auditor' });
    await expect.poll(() => keys.getByRole('row').count()).toBe(2);
    expect(await page.getByRole('button', { name: 'Delete caller' }).count()).toBe(0);
    expect(await page.getByRole('form', { name: 'Change the caller' }).count()).toBe(0);
    expect(await page.getByRole('form', { name: 'Issue a key' }).count()).toBe(0);
    expect(await keys.getByRole('button', { name: 'Revoke' }).count()).toBe(0);
    // And by its address, the new caller form says why not.
    await page.evaluate(() => (location.hash = '#/callers/new'));
    await page.getByText('may not create callers').waitFor();
    expectClean(tab);
    await page.context().close();
  });

  it('with the keyboard alone: Tab through the new caller form, tick a scope, Enter creates the caller', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, '#/callers/new');
    const page = tab.page;
    await page.getByRole('heading', { level: 1, name: 'New caller' }).waitFor();
    await page.getByLabel(/^Name/).waitFor();
    const active = () =>
      page.evaluate(() => {
        const element = document.activeElement as HTMLInputElement | null;
        return `${element?.tagName.toLowerCase()}:${element?.name ?? ''}:${element?.type ?? ''}`;
      });
    const tabTo = async (pattern: RegExp) => {
      for (let presses = 0; presses < 80 && !pattern.test(await active()); presses += 1)
        await page.keyboard.press('Tab');
      expect(await active()).toMatch(pattern);
    };
    await page.getByRole('heading', { level: 1, name: 'New caller' }).focus();
    await tabTo(/^input:name:/);
    await page.keyboard.type('keyboard-made');
    await page.keyboard.press('Tab');
    expect(await active()).toMatch(/^select:role:/);
    await page.keyboard.press('ArrowDown'); // reader → editor
    await page.keyboard.press('Tab');
    expect(await active()).toMatch(/^input:rate_limit:/);
    await page.keyboard.type('600');
    await page.keyboard.press('Tab');
    expect(await active()).toMatch(/^select:access-users:/);
    await tabTo(/^summary:/);
    await page.keyboard.press('Enter'); // opens the extra scopes
    await page.keyboard.press('Tab');
    await page.keyboard.press('Space'); // ticks the first: users:read
    await tabTo(/^button::submit$/);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'keyboard-made' }).waitFor();
    const { caller } = await storedCaller(await shownCallerId(tab));
    expect(caller).toMatchObject({ role: 'editor', rate_limit: 600, extra_scopes: ['users:read'] });
    expectClean(tab);
    await page.context().close();
  });

  it('at 1280 and 390 px: the list, the new caller form and a caller with a new key pass axe, and nothing scrolls sideways at 390', async () => {
    const target = await createCallerThroughApi(rig!.test, 'a-rather-long-caller-name-for-a-narrow-screen', {
      role: 'channel',
      extra_scopes: ['users:act'],
    });
    for (const viewport of [WIDE, NARROW]) {
      const tab = await signedIn(rig!, rig!.test.adminKey, viewport);
      const page = tab.page;
      await goTo(tab, 'Callers and keys');
      await page.getByRole('link', { name: target.name }).first().waitFor();
      await expectAccessible(tab, `the list at ${viewport.width} px`);
      if (viewport === NARROW) expect(await scrollsSideways(tab)).toBe(false);

      await page.evaluate(() => (location.hash = '#/callers/new'));
      await page.getByLabel(/^Name/).waitFor();
      await page.locator('summary', { hasText: 'Extra scopes' }).click();
      await expectAccessible(tab, `the new caller form at ${viewport.width} px`);
      if (viewport === NARROW) expect(await scrollsSideways(tab)).toBe(false);

      await openCaller(tab, target.id, target.name);
      await page.getByRole('form', { name: 'Issue a key' }).getByRole('button', { name: 'Issue a key' }).click();
      await page.getByRole('region', { name: 'The new key' }).waitFor();
      await expectAccessible(tab, `a caller's page with a new key at ${viewport.width} px`);
      if (viewport === NARROW) expect(await scrollsSideways(tab)).toBe(false);
      expectClean(tab);
      await page.context().close();
    }
  });
});
