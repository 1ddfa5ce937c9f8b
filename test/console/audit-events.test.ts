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
import { sample } from '../helpers/metrics.js';
import { createCallerThroughApi, createItem, createUser, setStock } from '../helpers/records.js';

let rig: ConsoleRig | undefined;
const missing = browserMissing();

interface AuditRow {
  request_id: string;
  caller_name: string | null;
  method: string;
  path: string;
  status: number;
}

/** The audit events the API answers for `query` (the first page of 500), as the admin reads them. */
async function trail(query: string): Promise<AuditRow[]> {
  const reply = await rig!.test.call({ url: `/v1/audit-events?limit=500&${query}` });
  expect(reply.status).toBe(200);
  return reply.json.data as AuditRow[];
}

/** The rows of the console's audit table once it has loaded: caller, method, path, status and request id of each. */
async function shownRows(tab: ConsoleTab): Promise<AuditRow[]> {
  const table = tab.page.getByRole('region', { name: 'Audit events' });
  await table.locator('tbody tr').first().waitFor();
  if ((await tab.page.locator('.paged').getAttribute('aria-busy')) !== 'false') return [];
  return table.locator('tbody tr').evaluateAll((rows) =>
    rows
      .filter((row) => row.querySelector('td.empty') === null)
      .map((row) => {
        const cell = (label: string) => (row.querySelector(`td[data-label="${label}"]`)?.textContent ?? '').trim();
        return {
          caller_name: cell('Caller'),
          method: cell('Method'),
          path: cell('Path'),
          status: Number(cell('Status')),
          request_id: cell('Request id'),
        };
      }),
  );
}

/** Waits until the table lists exactly the requests of `expected` (by request id), and answers its rows. */
async function expectRows(tab: ConsoleTab, expected: AuditRow[]): Promise<AuditRow[]> {
  const ids = expected.map((row) => row.request_id);
  await expect.poll(async () => (await shownRows(tab)).map((row) => row.request_id)).toEqual(ids);
  return shownRows(tab);
}

/** The console's route: the fragment of the tab's address. */
function hashOf(tab: ConsoleTab): string {
  return new URL(tab.page.url()).hash;
}

async function applyFilters(tab: ConsoleTab, fill: () => Promise<void>): Promise<void> {
  const before = hashOf(tab);
  await fill();
  await tab.page.getByRole('button', { name: 'Apply filters' }).click();
  await expect.poll(() => hashOf(tab)).not.toBe(before);
}

async function openStreams(): Promise<number> {
  const metrics = await rig!.test.call({ url: '/metrics', headers: { accept: 'text/plain' } });
  return sample(metrics.text, 'rowi_event_streams_open');
}

describe.skipIf(missing !== undefined)('the console’s audit trail', () => {
  let editor: { id: number; name: string; key: string };
  let orderId: number;

  beforeAll(async () => {
    rig = await startConsoleRig({ ROWI_AUDIT_FLUSH_INTERVAL: '20' });
    editor = await createCallerThroughApi(rig.test, 'audit-editor', { role: 'editor' });
    // The admin places an order; the editor renames it, reads a user that is not there, and is
    // refused a deletion (editors may not delete).
    const { user } = await createUser(rig.test);
    const { item } = await createItem(rig.test);
    await setStock(rig.test, item.id, 10);
    const order = await rig.test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'SO-AUDIT', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    expect(order.status).toBe(201);
    orderId = order.json.id as number;
    const patched = await rig.test.call({
      method: 'PATCH',
      url: `/v1/orders/${orderId}`,
      key: editor.key,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: { name: 'SO-AUDIT renamed' },
    });
    expect(patched.status).toBe(200);
    expect((await rig.test.call({ url: '/v1/users/999999', key: editor.key })).status).toBe(404);
    expect((await rig.test.call({ method: 'DELETE', url: `/v1/users/${user.id}`, key: editor.key })).status).toBe(403);
    await rig.test.call({ url: `/v1/orders/${orderId}`, key: editor.key });
    // The trail is written in batches: wait until the editor's last request is in it.
    for (let waited = 0; (await trail(`caller_id=${editor.id}`)).length < 4; waited += 20) {
      if (waited > 10_000) throw new Error('the editor’s requests did not reach the audit trail');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
  afterAll(() => rig?.close());

  it('when the operator filters by caller, method, status and path, then only the matching requests are listed, as the API answers them, read with those filters a page at a time', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, '#/audit');
    const page = tab.page;
    // What the console asks the API for: its filters, a page of 50, never the trail to search it.
    const asked: URLSearchParams[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname === '/v1/audit-events') asked.push(url.searchParams);
    });
    await page.getByRole('heading', { name: 'Audit trail', level: 1 }).waitFor();

    // By caller: the editor's four requests, newest first, exactly as the API lists them.
    await applyFilters(tab, async () => {
      await page.getByLabel('Caller', { exact: true }).selectOption({ label: `audit-editor (#${editor.id})` });
    });
    expect(hashOf(tab)).toBe(`#/audit?caller_id=${editor.id}`);
    const editorsTrail = await trail(`caller_id=${editor.id}`);
    const byCaller = await expectRows(tab, editorsTrail);
    expect(new Set(byCaller.map((row) => row.caller_name))).toEqual(new Set(['audit-editor']));

    // And by method.
    await applyFilters(tab, async () => {
      await page.getByLabel('Method', { exact: true }).selectOption('PATCH');
    });
    const patches = await expectRows(tab, await trail(`caller_id=${editor.id}&method=PATCH`));
    expect(patches).toHaveLength(1);
    expect(patches[0]).toMatchObject({ method: 'PATCH', path: `/v1/orders/${orderId}`, status: 200 });
    expect(Object.fromEntries(asked.at(-1)!)).toEqual({ caller_id: String(editor.id), method: 'PATCH', limit: '50' });

    // By status, then by a class of statuses.
    await applyFilters(tab, async () => {
      await page.getByLabel('Method', { exact: true }).selectOption('');
      await page.getByLabel('Status', { exact: true }).fill('404');
    });
    const notFound = await expectRows(tab, await trail(`caller_id=${editor.id}&status=404`));
    expect(notFound.map((row) => row.path)).toEqual(['/v1/users/999999']);
    await applyFilters(tab, () => page.getByLabel('Status', { exact: true }).fill('4xx'));
    const refused = await expectRows(tab, await trail(`caller_id=${editor.id}&status_class=4xx`));
    expect(refused.map((row) => row.status)).toEqual([403, 404]);
    expect(hashOf(tab)).toBe(`#/audit?caller_id=${editor.id}&status=4xx`);
    expect(Object.fromEntries(asked.at(-1)!)).toEqual({
      caller_id: String(editor.id),
      status_class: '4xx',
      limit: '50',
    });

    // Every caller's requests to the order's path and below: the editor's change and read, not POST /v1/orders.
    await applyFilters(tab, async () => {
      await page.getByLabel('Caller', { exact: true }).selectOption('');
      await page.getByLabel('Status', { exact: true }).fill('');
      await page.getByLabel('Path', { exact: true }).fill(`/v1/orders/${orderId}`);
    });
    const onOrder = await expectRows(tab, await trail(`path=/v1/orders/${orderId}`));
    expect(onOrder.map((row) => [row.caller_name, row.method])).toEqual([
      ['audit-editor', 'GET'],
      ['audit-editor', 'PATCH'],
    ]);
    expect(asked.every((query) => query.get('limit') === '50')).toBe(true);
    expectClean(tab);
    await page.context().close();
  });

  it('when the operator asks who changed an order, then the order’s trail shows the editor’s PATCH, and its details every field of the request', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, '#/audit');
    const page = tab.page;
    await page.getByRole('heading', { name: 'Audit trail', level: 1 }).waitFor();
    await applyFilters(tab, async () => {
      await page.getByLabel('Resource', { exact: true }).selectOption('orders');
      await page.getByLabel('Record id', { exact: true }).fill(String(orderId));
      await page.getByLabel('Action', { exact: true }).selectOption('update');
    });
    expect(hashOf(tab)).toBe(`#/audit?action=update&resource=orders&record_id=${orderId}`);
    const [patch] = (await trail(`caller_id=${editor.id}`)).filter((row) => row.method === 'PATCH');
    const changes = await expectRows(tab, [patch!]);
    expect(changes[0]).toMatchObject({ caller_name: 'audit-editor', method: 'PATCH', status: 200 });
    expect(await page.getByRole('heading', { level: 2 }).allTextContents()).toContain(
      `Requests (update) on orders ${orderId}`,
    );

    // The row opens its details: every field of the request.
    await page
      .getByRole('link', { name: /details/ })
      .first()
      .click();
    const details = page.getByRole('region', { name: 'What was asked, and the answer' });
    await expect.poll(() => details.textContent()).toContain('audit-editor');
    const text = (await details.textContent())!;
    for (const expected of ['PATCH', `/v1/orders/${orderId}`, 'update', 'api_key', patch!.request_id, '200'])
      expect(text).toContain(expected);
    await expectAccessible(tab, 'an audit event’s details');
    // Back to the filtered trail; then every request on this record.
    await page.getByRole('link', { name: 'Back to the trail' }).click();
    await expectRows(tab, [patch!]);
    await page
      .getByRole('link', { name: /details/ })
      .first()
      .click();
    await page.getByRole('link', { name: 'Every request on this record' }).click();
    await expectRows(
      tab,
      (await trail('resource=orders')).filter((row) => row.path.startsWith(`/v1/orders/${orderId}`)),
    );
    expectClean(tab);
    await page.context().close();
  });

  it('at 1280 and 390 px, the filtered trail passes axe and does not scroll sideways', async () => {
    for (const viewport of [WIDE, NARROW]) {
      const tab = await signedIn(rig!, rig!.test.adminKey, viewport);
      await goTo(tab, 'Audit trail');
      await tab.page.evaluate(`location.hash = '#/audit?caller_id=${editor.id}'`);
      await expectRows(tab, await trail(`caller_id=${editor.id}`));
      await expectAccessible(tab, `the audit trail at ${viewport.width} px`);
      if (viewport === NARROW) expect(await scrollsSideways(tab)).toBe(false);
      else await screenshot(tab, 'audit');
      expectClean(tab);
      await tab.page.context().close();
    }
  });
});

describe.skipIf(missing !== undefined)('the console’s live events', () => {
  beforeAll(async () => {
    rig = await startConsoleRig();
  });
  afterAll(() => rig?.close());

  /** The ids of the events the live list shows, newest first. */
  async function shownEvents(tab: ConsoleTab): Promise<string[]> {
    return tab.page
      .getByRole('list', { name: 'Events, newest first' })
      .getByRole('listitem')
      .evaluateAll((items) => items.map((item) => item.querySelector('.audit-id')?.textContent ?? ''));
  }

  async function eventIdsOfUsers(ids: number[]): Promise<string[]> {
    const reply = await rig!.test.call({ url: '/v1/events?type=user.created&limit=500' });
    const byPath = new Map((reply.json.data as { id: string; path: string }[]).map((event) => [event.path, event.id]));
    return ids.map((id) => byPath.get(`/v1/users/${id}`)!);
  }

  it('when users are created, then they appear live; paused, the new ones wait and are counted, and Resume shows exactly those, in order, once; leaving the view closes the stream', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE);
    const page = tab.page;
    await goTo(tab, 'Events, live');
    const state = page.getByRole('status').filter({ hasText: /Live|Paused|Connecting|Reconnecting/ });
    await expect.poll(() => state.textContent()).toContain('Live');
    await expect.poll(openStreams).toBe(1);

    const first: number[] = [];
    for (let index = 0; index < 3; index++) first.push((await createUser(rig!.test)).user.id);
    const firstEvents = await eventIdsOfUsers(first);
    await expect.poll(() => shownEvents(tab)).toEqual([...firstEvents].reverse());
    const newest = page.getByRole('list', { name: 'Events, newest first' }).getByRole('listitem').first();
    expect(await newest.textContent()).toContain('user.created');
    expect(await newest.textContent()).toContain(`/v1/users/${first[2]}`);
    // Its data, expanded, is the user as stored.
    await newest.getByText('Data', { exact: true }).click();
    const data = JSON.parse((await newest.getByLabel(/^Data of event/).textContent())!);
    expect(data).toEqual((await rig!.test.call({ url: `/v1/users/${first[2]}` })).json);

    await page.getByRole('button', { name: 'Pause' }).click();
    await expect.poll(() => state.textContent()).toContain('Paused');
    const paused: number[] = [];
    for (let index = 0; index < 5; index++) paused.push((await createUser(rig!.test)).user.id);
    await expect.poll(() => state.textContent()).toContain('5 events have arrived while paused');
    expect(await shownEvents(tab)).toEqual([...firstEvents].reverse());

    await page.getByRole('button', { name: 'Resume (5 new)' }).click();
    const pausedEvents = await eventIdsOfUsers(paused);
    await expect.poll(() => shownEvents(tab)).toEqual([...pausedEvents.reverse(), ...[...firstEvents].reverse()]);
    const shown = await shownEvents(tab);
    expect(new Set(shown).size).toBe(shown.length);
    expect(await page.getByText('Resumed: 5 events arrived while paused.').isVisible()).toBe(true);
    await expect.poll(() => state.textContent()).toContain('Live');

    await screenshot(tab, 'events-live');
    await expectAccessible(tab, 'the live events at 1280 px');

    // Leaving the view closes the stream.
    await goTo(tab, 'Health');
    await expect.poll(openStreams).toBe(0);
    expectClean(tab);
    await page.context().close();
  });

  it('when the connection drops, then the view says it is reconnecting and, connected again, shows what happened meanwhile, once', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE, '#/events');
    const page = tab.page;
    const state = page.getByRole('status').filter({ hasText: /Live|Paused|Connecting|Reconnecting/ });
    await expect.poll(() => state.textContent()).toContain('Live');
    const before = [(await createUser(rig!.test)).user.id];
    const beforeEvents = await eventIdsOfUsers(before);
    await expect.poll(() => shownEvents(tab)).toEqual(beforeEvents);

    // Every state the view says, from now on (however briefly it says it).
    await page.evaluate(`
      window.statesSaid = [];
      const said = document.querySelector('.event-state');
      new MutationObserver(() => window.statesSaid.push(said.textContent)).observe(said, {
        subtree: true, childList: true, characterData: true,
      });
    `);
    // Every connection to rowi drops (as when a proxy restarts): the view reconnects by itself.
    rig!.test.app.server.closeAllConnections();
    const meanwhile: number[] = [];
    for (let index = 0; index < 2; index++) meanwhile.push((await createUser(rig!.test)).user.id);
    const meanwhileEvents = await eventIdsOfUsers(meanwhile);
    await expect
      .poll(() => shownEvents(tab), { timeout: 15_000 })
      .toEqual([...meanwhileEvents.reverse(), ...beforeEvents]);
    await expect.poll(() => state.textContent()).toContain('Live');
    const said = (await page.evaluate('window.statesSaid')) as string[];
    expect(said.some((text) => text.startsWith('Reconnecting'))).toBe(true);
    await page.context().close();
  });

  it('when the operator picks event types, then the stream shows only those; at 390 px the view passes axe and does not scroll sideways', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, NARROW, '#/events');
    const page = tab.page;
    await page.getByText('Event types: all').click();
    await page.getByLabel('item.created').check();
    await page.getByRole('button', { name: 'Show these types' }).click();
    await expect.poll(() => hashOf(tab)).toBe('#/events?types=item.created');
    const state = page.getByRole('status').filter({ hasText: /Live|Paused|Connecting|Reconnecting/ });
    await expect.poll(() => state.textContent()).toContain('Live');
    await createUser(rig!.test);
    const { item } = await createItem(rig!.test);
    const list = page.getByRole('list', { name: 'Events, newest first' });
    await expect.poll(() => list.getByRole('listitem').count()).toBe(1);
    expect(await list.textContent()).toContain(`/v1/items/${item.id}`);
    expect(await list.textContent()).not.toContain('user.created');
    await expectAccessible(tab, 'the live events at 390 px');
    expect(await scrollsSideways(tab)).toBe(false);

    // History: the events kept, by type.
    await page.getByRole('link', { name: 'History' }).click();
    await page.getByRole('heading', { name: 'Events, history' }).waitFor();
    expect(await page.getByLabel('Event type').inputValue()).toBe('item.created');
    const table = page.getByRole('region', { name: 'Events' }).last();
    await expect.poll(() => table.locator('tbody tr').count()).toBe(1);
    expect(await table.textContent()).toContain(`/v1/items/${item.id}`);
    await expectAccessible(tab, 'the event history at 390 px');
    expect(await scrollsSideways(tab)).toBe(false);
    expectClean(tab);
    await page.context().close();
  });
});
