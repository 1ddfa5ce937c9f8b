import { createHmac } from 'node:crypto';
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
import { answer, Receiver, type Received } from '../helpers/receiver.js';
import { createCallerThroughApi, createUser } from '../helpers/records.js';
import { deliveriesOf, deliveriesWhen, WEBHOOK_SETTINGS, type Delivery } from '../helpers/webhooks.js';

/**
 * The webhooks section against the real rowi and a real receiver on loopback (allowed by
 * ROWI_WEBHOOK_ALLOW_HOSTS; retries 0.3 s apart, so that a failing delivery goes dead in seconds).
 */
let rig: ConsoleRig | undefined;
const receiver = new Receiver();
const missing = browserMissing();

/** The receiver fails every event about a user named so (500), and answers 200 to the rest. */
const FAILING = 'Ada Failing';

interface Endpoint {
  id: number;
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
  previous_secret_expires_at: string | null;
}

async function endpointOf(id: number): Promise<Endpoint> {
  return (await rig!.test.call({ url: `/v1/webhook-endpoints/${id}` })).json as Endpoint;
}

/** Whether `secret` made one of the signatures of what the receiver got (Standard Webhooks). */
function signedWith(received: Received, secret: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key)
    .update(
      `${String(received.headers['webhook-id'])}.${String(received.headers['webhook-timestamp'])}.${received.body}`,
    )
    .digest('base64');
  return String(received.headers['webhook-signature'])
    .split(' ')
    .some((signature) => signature === `v1,${expected}`);
}

/** Creates an endpoint through the console's form, for the types given (every type when none). */
async function createInConsole(
  tab: ConsoleTab,
  url: string,
  description: string,
  types: string[] = [],
): Promise<{ id: number; secret: string }> {
  const page = tab.page;
  await page.getByRole('button', { name: 'New endpoint' }).click();
  const form = page.getByRole('region', { name: 'New endpoint' });
  await form.getByLabel('URL').fill(url);
  await form.getByLabel('Description').fill(description);
  if (types.length > 0) {
    await form.getByRole('checkbox', { name: /Every type/ }).uncheck();
    for (const type of types) await form.getByRole('checkbox', { name: type, exact: true }).check();
  }
  await form.getByRole('button', { name: 'Create endpoint' }).click();
  const secretBox = page.getByRole('group', { name: 'Signing secret' });
  await secretBox.waitFor();
  const secret = (await secretBox.locator('code').textContent())!;
  const heading = (await page.getByRole('heading', { name: /^Endpoint \d+ created$/ }).textContent())!;
  return { id: Number(/\d+/.exec(heading)![0]), secret };
}

describe.skipIf(missing !== undefined)('the console in Chromium: webhooks and event types', () => {
  let endpointId = 0;
  let secret = '';
  let dead: Delivery | undefined;

  beforeAll(async () => {
    await receiver.start();
    receiver.behaviour = (request, response, received) =>
      answer(received.event.data.name === FAILING ? 500 : 200)(request, response, received);
    rig = await startConsoleRig(WEBHOOK_SETTINGS);
  });
  afterAll(async () => {
    await rig?.close();
    await receiver.stop();
  });

  it('when the admin creates an endpoint in the console, then it is stored as given, and its signing secret is shown once, copyable, and signs what the receiver gets', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Webhooks');
    await page.getByRole('heading', { name: 'Webhook endpoints', level: 1 }).waitFor();
    await expect
      .poll(() => page.getByRole('region', { name: 'Webhook endpoints' }).textContent())
      .toContain('No endpoints yet');

    // A loopback address the deployment does not allow is refused, and the console says why.
    await page.getByRole('button', { name: 'New endpoint' }).click();
    const form = page.getByRole('region', { name: 'New endpoint' });
    await form.getByLabel('URL').fill('https://169.254.169.254/latest');
    await form.getByRole('button', { name: 'Create endpoint' }).click();
    await expect.poll(() => form.getByRole('alert').textContent()).toContain('The endpoint was not created');
    expect(await form.textContent()).toContain('rowi sends only to https addresses on the public internet');
    await form.getByRole('button', { name: 'Cancel' }).click();

    ({ id: endpointId, secret } = await createInConsole(tab, receiver.url, 'user desk', [
      'user.created',
      'user.updated',
    ]));
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
    expect(await page.getByRole('status').first().textContent()).toContain(`Endpoint ${endpointId} created`);
    await page.getByRole('button', { name: 'Copy the secret' }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
    await expectAccessible(tab, 'the endpoints with a new endpoint and its secret');

    // Stored as given; the list shows it, and the secret once only.
    const stored = await endpointOf(endpointId);
    expect(stored).toMatchObject({
      url: receiver.url,
      description: 'user desk',
      events: ['user.created', 'user.updated'],
      enabled: true,
    });
    await page.getByRole('button', { name: 'I have copied it' }).click();
    const list = page.getByRole('region', { name: 'Webhook endpoints' });
    await expect.poll(() => list.textContent()).toContain(receiver.url);
    expect(await list.textContent()).toContain('user.created, user.updated');
    expect(await page.locator('main').textContent()).not.toContain(secret);
    await list.getByRole('link', { name: new RegExp(`Endpoint ${endpointId}`) }).click();
    await page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();
    expect(await page.locator('main').textContent()).not.toContain(secret);

    // The secret shown is the one that signs: a user's creation reaches the receiver signed with it.
    const { user } = await createUser(rig!.test, { name: 'Grace Signed' });
    const [got] = await receiver.waitFor(1, 10_000, (received) => received.event.data.id === user.id);
    expect(signedWith(got!, secret)).toBe(true);
    expectClean(tab);
    await page.context().close();
  }, 60_000);

  it("when a user change fails at the receiver, then the endpoint's page shows its health (success rate, lag, the last failure) and its deliveries with attempts and the receiver's status, filtered by status", async () => {
    const failing = await createUser(rig!.test, { name: FAILING });
    const working = await createUser(rig!.test, { name: 'Grace Working' });
    const patched = await rig!.test.call({
      method: 'PATCH',
      url: `/v1/users/${working.user.id}`,
      body: { name: 'Grace Working Too' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(patched.status, patched.text).toBe(200);
    const settled = await deliveriesWhen(
      rig!.test,
      endpointId,
      (deliveries) =>
        deliveries.some((delivery) => delivery.status === 'dead') &&
        deliveries.filter((delivery) => delivery.resource === `/v1/users/${working.user.id}`).length === 2 &&
        deliveries.every((delivery) => delivery.status !== 'pending'),
    );
    dead = settled.find((delivery) => delivery.status === 'dead')!;
    expect(dead).toMatchObject({ event_type: 'user.created', resource: `/v1/users/${failing.user.id}` });
    expect(dead.attempts.length).toBe(5);
    const health = (await rig!.test.call({ url: `/v1/webhook-endpoints/${endpointId}/health` })).json as {
      attempts: { total: number; succeeded: number };
      last_failure: { delivery_id: number };
      success_rate: number;
    };
    expect(health.last_failure.delivery_id).toBe(dead.id);

    const tab = await signedIn(rig!, undefined, WIDE, `#/webhooks/${endpointId}`);
    const page = tab.page;
    await page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();
    const healthPanel = page.getByRole('region', { name: 'Health' });
    await expect.poll(() => healthPanel.textContent()).toContain('Success rate');
    const healthText = (await healthPanel.textContent())!;
    expect(healthText).toContain(`${health.attempts.succeeded} of ${health.attempts.total} attempts`);
    expect(healthText).toContain(`${(health.success_rate * 100).toFixed(1)} %`);
    expect(healthText).toContain('Lag');
    expect(healthText).toContain('nothing waiting');
    expect(healthText).toContain('answered 500');
    expect(await healthPanel.getByRole('link', { name: `delivery #${dead.id}` }).getAttribute('href')).toBe(
      `#/webhooks/${endpointId}/deliveries/${dead.id}`,
    );

    const table = page.getByRole('region', { name: 'Deliveries' }).getByRole('region', { name: 'Deliveries' });
    await expect.poll(() => table.locator('tbody tr').count()).toBe(settled.length);
    const deadRow = table.locator('tbody tr').filter({ has: page.getByRole('link', { name: `Delivery #${dead.id}` }) });
    const deadText = (await deadRow.textContent())!;
    expect(deadText).toContain('user.created');
    expect(deadText).toContain('dead');
    expect(deadText).toContain('answered 500');
    expect(await deadRow.locator('td[data-label="Attempts"]').textContent()).toBe('5');
    const succeeded = settled.filter((delivery) => delivery.status === 'succeeded');
    expect(await table.getByText('succeeded', { exact: true }).count()).toBe(succeeded.length);
    expect(await table.getByText('answered 200').count()).toBe(succeeded.length);
    await expectAccessible(tab, "an endpoint's page with its health and deliveries");
    await screenshot(tab, 'webhooks-endpoint');

    // Filtered by status: only the dead one, and the address says so.
    await page.getByLabel('Status').selectOption('dead');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe(`#/webhooks/${endpointId}?status=dead`);
    await expect.poll(() => table.locator('tbody tr').count()).toBe(1);
    expect(await table.textContent()).toContain(`#${dead.id}`);
    await page.getByLabel('Status').selectOption('pending');
    await expect.poll(() => table.textContent()).toContain('No pending deliveries.');
    await page.getByLabel('Status').selectOption('');
    await expect.poll(() => table.locator('tbody tr').count()).toBe(settled.length);

    // The list of endpoints: each with its health in a line.
    await page.getByRole('link', { name: 'Webhook endpoints' }).click();
    const list = page.getByRole('region', { name: 'Webhook endpoints' });
    await expect.poll(() => list.textContent()).toContain(`${(health.success_rate * 100).toFixed(1)} % succeeded`);
    expect(await list.textContent()).toContain('1 dead');

    // The Health view's backlog: the endpoint, nothing waiting, its success rate and last failure.
    await goTo(tab, 'Health');
    const backlog = page.getByRole('region', { name: 'Webhook backlog' });
    const row = backlog.locator('tbody tr').filter({ hasText: receiver.url });
    await expect.poll(() => row.textContent()).toContain(`${(health.success_rate * 100).toFixed(1)} %`);
    expect(await row.locator('td[data-label="Waiting"]').textContent()).toBe('0');
    expect(await row.locator('td[data-label="State"]').textContent()).toBe('enabled');
    expect(await row.locator('td[data-label="Last failure"] time').getAttribute('datetime')).not.toBeNull();
    expect(await backlog.getByRole('link', { name: receiver.url }).getAttribute('href')).toBe(
      `#/webhooks/${endpointId}`,
    );
    expectClean(tab);
    await page.context().close();
  }, 60_000);

  it("when the operator opens the dead delivery, then its attempts show the receiver's answers and the payload; sent again once the receiver works, it is delivered", async () => {
    const tab = await signedIn(rig!, undefined, WIDE, `#/webhooks/${endpointId}?status=dead`);
    const page = tab.page;
    await page.getByRole('link', { name: `Delivery #${dead!.id}`, exact: true }).click();
    await page.getByRole('heading', { name: `Delivery ${dead!.id}`, level: 1 }).waitFor();
    const attempts = page.getByRole('region', { name: 'Attempts' }).getByRole('region', { name: 'Attempts' });
    await expect.poll(() => attempts.locator('tbody tr').count()).toBe(5);
    for (const row of await attempts.locator('tbody tr').all()) {
      expect(await row.locator('td[data-label="Status"]').textContent()).toBe('500');
      expect(await row.locator('td[data-label="Outcome"]').textContent()).toBe('answered 500');
      expect(await row.locator('td[data-label="Took"]').textContent()).toMatch(/\d+ ms/);
    }
    const payload = page.getByLabel(`The payload of event ${dead!.event_id}`);
    await expect.poll(() => payload.textContent()).toContain(FAILING);
    expect(await page.getByRole('region', { name: 'Delivery' }).textContent()).toContain('dead');
    await expectAccessible(tab, "a delivery's attempts");
    await screenshot(tab, 'webhooks-delivery');

    // The receiver is fixed; sent again, the delivery goes pending, then succeeded.
    receiver.behaviour = answer(200);
    const before = receiver.received.length;
    await page.getByRole('button', { name: 'Send again' }).click();
    await expect.poll(() => page.getByRole('status').first().textContent()).toContain('Sent again');
    await expect
      .poll(() => page.getByRole('region', { name: 'Delivery' }).textContent(), { timeout: 15_000 })
      .toContain('succeeded');
    await expect.poll(() => attempts.locator('tbody tr').count()).toBe(6);
    expect(await attempts.locator('tbody tr').last().locator('td[data-label="Outcome"]').textContent()).toBe(
      'delivered',
    );
    expect(receiver.received.slice(before).some((received) => received.event.id === dead!.event_id)).toBe(true);
    const stored = (await deliveriesOf(rig!.test, endpointId)).find((delivery) => delivery.id === dead!.id)!;
    expect(stored.status).toBe('succeeded');
    expect(stored.attempts.at(-1)).toMatchObject({ status_code: 200, error: null });
    expectClean(tab);
    await page.context().close();
  }, 60_000);

  it('when the operator sends a test event, disables and enables the endpoint and rotates its secret, then each is stored, and the new secret is shown once with how long the old one still signs', async () => {
    const tab = await signedIn(rig!, undefined, WIDE, `#/webhooks/${endpointId}`);
    const page = tab.page;
    await page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();
    const actions = page.getByRole('region', { name: 'Actions' });

    // A test event: what the receiver answered.
    await actions.getByRole('button', { name: 'Send a test event' }).click();
    await expect
      .poll(() => actions.locator('.ping-result').textContent(), { timeout: 15_000 })
      .toMatch(/The receiver answered 200 in \d+ ms/);
    const [ping] = await receiver.waitFor(1, 10_000, (received) => received.event.type === 'webhook.ping');
    expect(ping!.event.data).toMatchObject({ endpoint_id: endpointId, url: receiver.url });

    // Disabled (after a confirmation): stored, and a delivery cannot be sent again meanwhile (409, explained).
    await actions.getByRole('button', { name: 'Disable' }).click();
    await actions.getByRole('button', { name: 'Yes, disable' }).click();
    await expect.poll(() => actions.getByRole('status').first().textContent()).toContain('Disabled');
    await expect.poll(async () => (await endpointOf(endpointId)).enabled).toBe(false);
    await expect.poll(() => page.getByRole('region', { name: 'Endpoint' }).textContent()).toContain('disabled');
    expect(await actions.getByRole('button', { name: 'Send a test event' }).isDisabled()).toBe(true);

    await page.evaluate((to) => (location.hash = to), `#/webhooks/${endpointId}/deliveries/${dead!.id}`);
    await page.getByRole('heading', { name: `Delivery ${dead!.id}`, level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Send again' }).click();
    const refused = page.getByRole('region', { name: 'Delivery' });
    await expect.poll(() => refused.getByRole('alert').textContent()).toContain('Not sent again');
    expect(await refused.textContent()).toContain('The endpoint is disabled: enable it first');
    await page.getByRole('link', { name: `Endpoint ${endpointId}` }).click();
    await page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();

    await actions.getByRole('button', { name: 'Enable' }).click();
    await expect.poll(() => actions.getByRole('status').first().textContent()).toContain('Enabled');
    await expect.poll(async () => (await endpointOf(endpointId)).enabled).toBe(true);

    // The secret rotated (after a confirmation): the new one shown once; the old one signs beside it for a day.
    await actions.getByRole('button', { name: 'Rotate the secret' }).click();
    await actions.getByRole('button', { name: 'Yes, rotate the secret' }).click();
    const box = actions.getByRole('group', { name: 'Signing secret' });
    await box.waitFor();
    const rotated = (await box.locator('code').textContent())!;
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    const stored = await endpointOf(endpointId);
    expect(stored.previous_secret_expires_at).not.toBeNull();
    const panel = (await actions.textContent())!;
    expect(panel).toContain('The previous secret keeps signing beside it until');
    expect(panel).toMatch(/\(2[34] h \d+ min from now\)/);
    await expect.poll(() => actions.getByRole('button', { name: 'Rotate the secret' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Copy the secret' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(rotated);

    // Both secrets sign what is sent now.
    const { user } = await createUser(rig!.test, { name: 'Grace Rotated' });
    const [got] = await receiver.waitFor(1, 10_000, (received) => received.event.data.id === user.id);
    expect(signedWith(got!, rotated)).toBe(true);
    expect(signedWith(got!, secret)).toBe(true);

    // Shown once: back on the page, it is gone.
    await page.getByRole('link', { name: 'Webhook endpoints' }).click();
    await page.getByRole('link', { name: new RegExp(`Endpoint ${endpointId}`) }).click();
    await page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();
    await expect
      .poll(() => page.getByRole('region', { name: 'Endpoint' }).textContent())
      .toContain('still signs beside the current one until');
    expect(await page.locator('main').textContent()).not.toContain(rotated);
    expect(tab.errors.filter((error) => !/409/.test(error))).toEqual([]);
    expect(tab.dialogs).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('when the event types page is opened, then it lists every type of the catalogue with its description and an example payload', async () => {
    const catalogue = (await rig!.test.call({ url: '/v1/event-types' })).json as {
      data: { type: string; resource: string; description: string; example: { type: string } }[];
    };
    expect(catalogue.data.length).toBeGreaterThan(10);
    const tab = await signedIn(rig!);
    const page = tab.page;
    await goTo(tab, 'Event types');
    await page.getByRole('heading', { name: 'Event types', level: 1 }).waitFor();
    await expect.poll(() => page.locator('section.event-type').count()).toBe(catalogue.data.length);
    for (const type of catalogue.data) {
      const panel = page.getByRole('region', { name: type.type, exact: true });
      expect(await panel.textContent()).toContain(type.description);
      const example = JSON.parse((await panel.getByLabel(`An example of ${type.type}`).textContent())!) as unknown;
      expect(example).toEqual(type.example);
    }
    await expectAccessible(tab, 'the event types');
    await screenshot(tab, 'event-types');

    // One resource's types.
    await page.getByLabel('Resource').selectOption('orders');
    const orders = catalogue.data.filter((type) => type.resource === 'orders');
    await expect.poll(() => page.locator('section.event-type').count()).toBe(orders.length);
    expectClean(tab);
    await page.context().close();
  });

  it('when the event types are offered for a new endpoint, then every type an endpoint may subscribe to is a checkbox (the test event is not)', async () => {
    const catalogue = (await rig!.test.call({ url: '/v1/event-types' })).json as { data: { type: string }[] };
    const tab = await signedIn(rig!, undefined, WIDE, '#/webhooks');
    const page = tab.page;
    await page.getByRole('button', { name: 'New endpoint' }).click();
    const form = page.getByRole('region', { name: 'New endpoint' });
    await form.getByRole('checkbox', { name: /Every type/ }).uncheck();
    for (const { type } of catalogue.data)
      expect(await form.getByRole('checkbox', { name: type, exact: true }).count(), type).toBe(
        type === 'webhook.ping' ? 0 : 1,
      );
    await form.getByRole('button', { name: 'Cancel' }).click();
    expectClean(tab);
    await page.context().close();
  });

  it('at 390 px wide, then the endpoints, an endpoint, a delivery and the event types are accessible and the page does not scroll sideways', async () => {
    const tab = await signedIn(rig!, undefined, NARROW);
    const page = tab.page;
    await goTo(tab, 'Webhooks');
    await page.getByRole('heading', { name: 'Webhook endpoints', level: 1 }).waitFor();
    await expect
      .poll(() => page.getByRole('region', { name: 'Webhook endpoints' }).textContent())
      .toContain('succeeded');
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'the endpoints at 390 px');
    await page.getByRole('link', { name: new RegExp(`Endpoint ${endpointId}`) }).click();
    await page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();
    await expect.poll(() => page.getByRole('region', { name: 'Health' }).textContent()).toContain('Success rate');
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'an endpoint at 390 px');
    await page.getByRole('link', { name: `Delivery #${dead!.id}`, exact: true }).click();
    await page.getByRole('heading', { name: `Delivery ${dead!.id}`, level: 1 }).waitFor();
    await expect.poll(() => page.getByLabel(`The payload of event ${dead!.event_id}`).count()).toBe(1);
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'a delivery at 390 px');
    await goTo(tab, 'Event types');
    await page.getByRole('heading', { name: 'Event types', level: 1 }).waitFor();
    await expect.poll(() => page.locator('section.event-type').count()).toBeGreaterThan(10);
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'the event types at 390 px');
    expectClean(tab);
    await page.context().close();
  }, 60_000);

  it('when the operator deletes an endpoint (after a confirmation), then it is gone from rowi and the list says so; a reader sees endpoints without the actions', async () => {
    const tab = await signedIn(rig!, undefined, WIDE, '#/webhooks');
    const page = tab.page;
    const { id } = await createInConsole(tab, `${receiver.url}/spare`, 'to delete');
    await page.getByRole('link', { name: `Open endpoint ${id}` }).click();
    await page.getByRole('heading', { name: `Endpoint ${id}`, level: 1 }).waitFor();
    const actions = page.getByRole('region', { name: 'Actions' });
    await actions.getByRole('button', { name: 'Delete' }).click();
    await actions.getByRole('button', { name: 'Keep' }).click();
    expect((await rig!.test.call({ url: `/v1/webhook-endpoints/${id}` })).status).toBe(200);
    await actions.getByRole('button', { name: 'Delete' }).click();
    await actions.getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByRole('heading', { name: 'Webhook endpoints', level: 1 }).waitFor();
    expect(await page.getByRole('status').first().textContent()).toContain(`Endpoint ${id}`);
    expect((await rig!.test.call({ url: `/v1/webhook-endpoints/${id}` })).status).toBe(404);
    expectClean(tab);
    await page.context().close();

    // A caller that may read endpoints but not change them: no actions offered.
    const reader = await createCallerThroughApi(rig!.test, 'hook-watcher', {
      role: 'reader',
      extra_scopes: ['webhook-endpoints:read'],
    });
    const watcher = await signedIn(rig!, reader.key, WIDE, `#/webhooks/${endpointId}`);
    await watcher.page.getByRole('heading', { name: `Endpoint ${endpointId}`, level: 1 }).waitFor();
    await expect
      .poll(() => watcher.page.getByRole('region', { name: 'Health' }).textContent())
      .toContain('Success rate');
    expect(await watcher.page.getByRole('region', { name: 'Actions' }).count()).toBe(0);
    await watcher.page.getByRole('link', { name: 'Webhook endpoints' }).click();
    await watcher.page.getByRole('heading', { name: 'Webhook endpoints', level: 1 }).waitFor();
    expect(await watcher.page.getByRole('button', { name: 'New endpoint' }).count()).toBe(0);
    expectClean(watcher);
    await watcher.page.context().close();
  }, 60_000);
});
