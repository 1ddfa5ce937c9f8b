import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { startNotesApp } from '../helpers/notes.js';
import { expectProblem } from '../helpers/problems.js';
import { eventually, Receiver } from '../helpers/receiver.js';
import { createCallerWithKey } from '../helpers/records.js';
import { createEndpoint, deliveriesOf, WEBHOOK_SETTINGS } from '../helpers/webhooks.js';

// notes, a resource declared only in the tests (test/helpers/notes.ts): its events reach a webhook
// endpoint as rowi's own resources' do, and only a caller that may read notes may ask for them.
let test: TestApp;
let receiver: Receiver | undefined;
beforeAll(async () => {
  test = await startNotesApp(WEBHOOK_SETTINGS);
});
afterAll(() => test.close());
afterEach(async () => {
  await receiver?.stop();
  receiver = undefined;
  // Endpoints of one test never receive the next test's events.
  for (const endpoint of (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data)
    await test.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${endpoint.id}` });
});

describe('webhooks of a declared resource', () => {
  it('POST and PATCH /v1/notes: an endpoint for note.created and note.updated gets both, signed as Standard Webhooks says, the note as data, in order', async () => {
    receiver = await new Receiver().start();
    const endpoint = await createEndpoint(test, receiver, ['note.created', 'note.updated']);

    const created = await test.call({ method: 'POST', url: '/v1/notes', body: { title: 'Shelves', text: 'count' } });
    expect(created.status).toBe(201);
    const path = `/v1/notes/${created.json.id}`;
    const changed = await test.call({ method: 'PATCH', url: path, body: { text: 'count twice' } });
    expect(changed.status).toBe(200);

    const received = await receiver.waitFor(2);
    const payloads = received.map((request) =>
      new Webhook(endpoint.secret).verify(request.body, request.headers as Record<string, string>),
    );
    expect(payloads).toEqual([
      expect.objectContaining({ type: 'note.created', path, data: expect.objectContaining(created.json) }),
      expect.objectContaining({ type: 'note.updated', path, data: expect.objectContaining(changed.json) }),
    ]);
    expect(received.map((request) => request.headers['webhook-id'])).toEqual(
      received.map((request) => request.event.id),
    );
    const deliveries = await eventually(
      () => deliveriesOf(test, endpoint.id),
      (list) => list.length === 2 && list.every((delivery) => delivery.status === 'succeeded'),
    );
    expect(deliveries.map((delivery) => [delivery.event_type, delivery.resource]).sort()).toEqual([
      ['note.created', path],
      ['note.updated', path],
    ]);
    expect(receiver.received).toHaveLength(2);
  });

  it('POST /v1/webhook-endpoints: 422 validation-failed naming notes:read, and no endpoint, when the caller’s role cannot read notes', async () => {
    // A channel reads the catalogue and its own orders and users, never notes; here it may also make endpoints.
    const { key } = await createCallerWithKey(test, {
      role: 'channel',
      extra_scopes: ['webhook-endpoints:read', 'webhook-endpoints:create'],
    });
    receiver = await new Receiver().start();
    const before = (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data.length;

    const refused = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      body: { url: receiver.url, events: ['order.created', 'note.created', 'note.updated'] },
      key,
    });

    expectProblem(refused, 422, 'validation-failed');
    expect(refused.json.errors).toEqual([
      expect.objectContaining({
        pointer: '#/events/1',
        detail: 'note.created is an event of notes, which this caller may not read (notes:read)',
      }),
      expect.objectContaining({
        pointer: '#/events/2',
        detail: 'note.updated is an event of notes, which this caller may not read (notes:read)',
      }),
    ]);
    expect((await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data).toHaveLength(before);
  });
});
