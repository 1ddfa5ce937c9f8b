import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { expectProblem } from '../helpers/problems.js';
import { eventually, Receiver } from '../helpers/receiver.js';
import { createCallerWithKey, createItem } from '../helpers/records.js';
import {
  createEndpoint,
  deliverMarker,
  deliveriesOf,
  deliveriesWhen,
  typesAfter,
  WEBHOOK_SETTINGS,
} from '../helpers/webhooks.js';

let test: TestApp;
const receivers: Receiver[] = [];
beforeAll(async () => {
  test = await startApp(WEBHOOK_SETTINGS);
});
afterAll(() => test.close());
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.stop()));
  for (const endpoint of (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data)
    await test.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${endpoint.id}` });
});

async function receiver(): Promise<Receiver> {
  const started = await new Receiver().start();
  receivers.push(started);
  return started;
}

const endpointPath = (id: number) => `/v1/webhook-endpoints/${id}`;

describe('who a webhook endpoint acts for', () => {
  it('POST /v1/webhook-endpoints: the endpoint records the caller that created it as owner_caller_id', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'admin' });
    const created = await createEndpoint(test, await receiver(), ['*'], key);
    expect(created.owner_caller_id).toBe(caller.id);
    expect((await test.call({ url: endpointPath(created.id) })).json.owner_caller_id).toBe(caller.id);
  });

  it('a delivery fanned out while the owner could read its event, sent after the owner lost that: not sent, dead at once with the reason, and the next deliveries go on', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'admin' });
    const hooks = await receiver();
    const endpoint = await createEndpoint(test, hooks, ['item.created', 'user.created'], key);
    const port = await hooks.stop();
    await createItem(test);
    await deliveriesWhen(test, endpoint.id, (list) => list[0]?.attempts.length === 1);
    const narrowed = await test.call({
      method: 'PATCH',
      url: `/v1/callers/${caller.id}`,
      body: { removed_scopes: ['items:read'] },
    });
    expect(narrowed.status).toBe(200);
    await hooks.start(port);
    await deliverMarker(test, hooks, 'After narrowing');
    expect(typesAfter(hooks)).toEqual(['user.created']);
    const [marker, skipped] = await deliveriesWhen(test, endpoint.id, (list) => list[0]?.status === 'succeeded');
    expect(marker!.event_type).toBe('user.created');
    expect(skipped).toMatchObject({ event_type: 'item.created', status: 'dead' });
    expect(skipped!.attempts.map((attempt) => attempt.error)).toEqual([
      'connection refused',
      `not sent: the endpoint's owner (caller ${caller.id}) may no longer read items (items:read)`,
    ]);
    // Not the receiver's failure: the endpoint's count of failures in a row was reset by the marker and not raised by the refusal.
    expect((await test.call({ url: endpointPath(endpoint.id) })).json).toMatchObject({
      enabled: true,
      failed_attempts: 0,
    });
  });

  it("DELETE /v1/callers/{id} of an endpoint's owner: the endpoint is disabled saying why, nothing more is sent; a caller that enables it again becomes its owner", async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'admin' });
    const hooks = await receiver();
    const endpoint = await createEndpoint(test, hooks, ['user.created'], key);
    await deliverMarker(test, hooks, 'Before deletion');
    expect((await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}` })).status).toBe(204);
    await test.call({
      method: 'POST',
      url: '/v1/users',
      body: { name: 'Unseen', email: `unseen.${Date.now()}@example.com` },
    });
    const disabled = await eventually(
      async () => (await test.call({ url: endpointPath(endpoint.id) })).json,
      (body) => body.enabled === false,
    );
    expect(disabled).toMatchObject({
      owner_caller_id: caller.id,
      disabled_reason: `its owner, caller ${caller.id}, no longer exists: nothing is sent until a caller that may enable it does (PATCH {"enabled": true}) and so becomes its owner`,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(typesAfter(hooks, 'Before deletion')).toEqual([]);
    const enabled = await test.call({ method: 'PATCH', url: endpointPath(endpoint.id), body: { enabled: true } });
    expect(enabled.status).toBe(200);
    expect(enabled.json).toMatchObject({ enabled: true, owner_caller_id: 1, disabled_reason: null });
    await deliverMarker(test, hooks, 'Adopted');
  });
});

describe('changes of an endpoint by a caller that could not have created it', () => {
  /** An editor granted every webhook-endpoints scope: it may read data, never callers. */
  const borrower = () =>
    createCallerWithKey(test, {
      role: 'editor',
      extra_scopes: [
        'webhook-endpoints:read',
        'webhook-endpoints:create',
        'webhook-endpoints:update',
        'webhook-endpoints:delete',
      ],
    });

  it('every change of an admin\'s ["*"] endpoint by a caller without callers:read: 403 webhook-endpoint-forbidden naming callers:read, nothing changed, nothing sent elsewhere', async () => {
    const hooks = await receiver();
    const endpoint = await createEndpoint(test, hooks, ['*']);
    const { key } = await borrower();
    const elsewhere = await receiver();
    const ping = (await test.call({ method: 'POST', url: `${endpointPath(endpoint.id)}/ping` })).json;
    const delivered = await deliveriesWhen(test, endpoint.id, (list) =>
      list.every((delivery) => delivery.status === 'succeeded'),
    );
    const before = (await test.call({ url: endpointPath(endpoint.id) })).json;
    for (const [method, url, body] of [
      ['PATCH', endpointPath(endpoint.id), { url: elsewhere.url }],
      ['PATCH', endpointPath(endpoint.id), { description: 'mine now' }],
      ['PATCH', endpointPath(endpoint.id), { enabled: false }],
      ['POST', `${endpointPath(endpoint.id)}/ping`, undefined],
      ['POST', `${endpointPath(endpoint.id)}/rotate-secret`, undefined],
      ['POST', `${endpointPath(endpoint.id)}/deliveries/${ping.id}/retry`, undefined],
      ['DELETE', endpointPath(endpoint.id), undefined],
    ] as const) {
      const refused = expectProblem(
        await test.call({ method, url, key, ...(body ? { body } : {}) }),
        403,
        'webhook-endpoint-forbidden',
      );
      expect(refused.detail, `${method} ${url}`).toContain(`Webhook endpoint ${endpoint.id} sends events of callers`);
      // Operations' events go only to callers that see every operation: operations:read too.
      expect(refused.required_scopes).toEqual(['callers:read', 'operations:read']);
    }
    expect((await test.call({ url: endpointPath(endpoint.id) })).json).toEqual(before);
    expect(await deliveriesOf(test, endpoint.id)).toEqual(delivered);
    // The secret was not rotated: the one shown at creation still signs.
    await test.call({ method: 'POST', url: '/v1/callers', body: { name: `seen-${Date.now()}`, role: 'reader' } });
    const [created] = await hooks.waitFor(1, 10_000, (received) => received.event.type === 'caller.created');
    expect(
      new Webhook(endpoint.secret).verify(created!.body, created!.headers as Record<string, string>),
    ).toMatchObject({ type: 'caller.created' });
    expect(elsewhere.received).toEqual([]);
  });

  it('PATCH /v1/webhook-endpoints/{id}: an endpoint for order events only may be changed by a caller that may read orders, but its URL only by its owner', async () => {
    const endpoint = await createEndpoint(test, await receiver(), ['order.created']);
    const { key } = await borrower();
    const described = await test.call({
      method: 'PATCH',
      url: endpointPath(endpoint.id),
      key,
      body: { description: 'sales' },
    });
    expect(described.status).toBe(200);
    expect(described.json).toMatchObject({ description: 'sales', owner_caller_id: 1 });
    const moved = expectProblem(
      await test.call({
        method: 'PATCH',
        url: endpointPath(endpoint.id),
        key,
        body: { url: 'https://hooks.example.com/mine' },
      }),
      403,
      'webhook-endpoint-forbidden',
    );
    expect(moved.detail).toBe(
      `Only its owner (caller 1) may change where webhook endpoint ${endpoint.id} sends events; create an endpoint of your own instead.`,
    );
    const widened = expectProblem(
      await test.call({
        method: 'PATCH',
        url: endpointPath(endpoint.id),
        key,
        body: { events: ['order.created', 'caller.created'] },
      }),
      403,
      'webhook-endpoint-forbidden',
    );
    expect(widened.required_scopes).toEqual(['callers:read']);
    expect((await test.call({ url: endpointPath(endpoint.id) })).json).toMatchObject({
      url: described.json.url,
      events: ['order.created'],
      description: 'sales',
    });
  });

  it('PATCH /v1/webhook-endpoints/{id}: an owner narrowed since may not ask for types it can no longer read (422 naming the owner)', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'admin' });
    const endpoint = await createEndpoint(test, await receiver(), ['user.created'], key);
    await test.call({ method: 'PATCH', url: `/v1/callers/${caller.id}`, body: { removed_scopes: ['orders:read'] } });
    const refused = expectProblem(
      await test.call({ method: 'PATCH', url: endpointPath(endpoint.id), body: { events: ['order.created'] } }),
      422,
      'validation-failed',
    );
    expect(refused.errors).toEqual([
      expect.objectContaining({
        pointer: '#/events/0',
        detail: `order.created is an event of orders, which its owner (caller ${caller.id}) may not read (orders:read)`,
      }),
    ]);
  });
});

describe('endpoints and the tokens of an external issuer', () => {
  let issuer: LocalIssuer;
  let external: TestApp;
  beforeAll(async () => {
    issuer = await startIssuer({ audience: 'rowi' });
    external = await startApp({
      ...WEBHOOK_SETTINGS,
      ROWI_JWT_ISSUER: issuer.url,
      ROWI_JWT_AUDIENCE: 'rowi',
      ROWI_JWT_JWKS_URL: issuer.jwksUrl,
    });
  });
  afterAll(async () => {
    await external.close();
    await issuer.close();
  });

  it("POST and PATCH /v1/webhook-endpoints with an external issuer's token: 403 webhook-endpoint-forbidden (an endpoint acts for a rowi caller); nothing stored or changed", async () => {
    const token = await issuer.sign({
      sub: 'partner',
      scope: 'webhook-endpoints:read webhook-endpoints:create webhook-endpoints:update users:read',
    });
    const headers = { authorization: `Bearer ${token}` };
    const refused = expectProblem(
      await external.call({
        method: 'POST',
        url: '/v1/webhook-endpoints',
        headers,
        body: { url: 'https://hooks.example.com/partner', events: ['user.created'] },
      }),
      403,
      'webhook-endpoint-forbidden',
    );
    expect(refused.detail).toContain("the subject of an external issuer's token is not one");
    const theirs = (
      await external.call({
        method: 'POST',
        url: '/v1/webhook-endpoints',
        body: { url: 'https://hooks.example.com/admin', events: ['user.created'] },
      })
    ).json;
    expectProblem(
      await external.call({ method: 'PATCH', url: endpointPath(theirs.id), headers, body: { description: 'partner' } }),
      403,
      'webhook-endpoint-forbidden',
    );
    expect((await external.call({ url: '/v1/webhook-endpoints' })).json.data).toEqual([
      expect.objectContaining({ id: theirs.id, description: '' }),
    ]);
  });
});
