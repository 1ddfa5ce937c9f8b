import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { eventually, Receiver } from '../helpers/receiver.js';
import { createCallerWithKey, createItem, createUser } from '../helpers/records.js';
import { createEndpoint, deliverMarker, deliveriesOf, deliveriesWhen, WEBHOOK_SETTINGS } from '../helpers/webhooks.js';

/**
 * A change made while the dispatcher fans events out (docs/events.md "Who an endpoint acts for"),
 * at the worst moment, deterministically: right after the dispatcher has read the enabled endpoints
 * and their owners, before it goes on. An event committed with or after the change is judged by
 * the endpoints and owners as changed: what the owner can no longer read is not made a delivery of
 * (the check before each attempt is not what stops it), and an endpoint made then gets it.
 */
/** Runs a change once, when the next read of the enabled endpoints with their owners has been answered, before its rows go back. */
class AfterEndpointsRead implements KyselyPlugin {
  #change: (() => Promise<void>) | undefined;
  readonly #reads = new WeakSet<object>();

  /** Settles once the change has been made. */
  once(change: () => Promise<void>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#change = () => change().then(resolve, reject);
    });
  }

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    if (this.#change !== undefined && node.kind === 'SelectQueryNode') {
      const shape = JSON.stringify(node);
      // The dispatcher's read: webhook_endpoints joined with callers, where enabled.
      if (shape.includes('"webhook_endpoints"') && shape.includes('"callers"') && shape.includes('"enabled"'))
        this.#reads.add(queryId);
    }
    return node;
  }

  async transformResult({ queryId, result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    if (this.#reads.has(queryId) && this.#change !== undefined) {
      const change = this.#change;
      this.#change = undefined;
      await change();
    }
    return result;
  }
}

const afterEndpointsRead = new AfterEndpointsRead();
let test: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  test = await startApp(WEBHOOK_SETTINGS, undefined, {
    // The app's handle on the database, through the plugin: the dispatcher's reads included.
    prepare: async (storage) => {
      const db = storage.db;
      storage.db = Object.assign(db.withPlugin(afterEndpointsRead), {
        commits: db.commits,
        outage: db.outage,
        readCache: db.readCache,
      }) as Db;
    },
  });
});
afterAll(() => test.close());
afterEach(async () => {
  await receiver?.stop();
  for (const endpoint of (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data)
    await test.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${endpoint.id}` });
});

/** An admin caller, and an endpoint of its for every event, which has received a marker: everything before it is fanned out. */
async function ownerWithEndpoint() {
  const { caller, key } = await createCallerWithKey(test, { role: 'admin' });
  receiver = await new Receiver().start();
  const endpoint = await createEndpoint(test, receiver, ['*'], key);
  await deliverMarker(test, receiver, 'Before');
  return { callerId: caller.id, endpointId: endpoint.id };
}

const typesListed = async (endpointId: number) =>
  (await deliveriesOf(test, endpointId)).map((delivery) => delivery.event_type);

describe('webhooks × a change made just as the dispatcher has read the endpoints', () => {
  it("the owner's scopes narrowed (removed_scopes users:read) then a user made, right after the endpoint was read: that user's event is neither sent nor made a delivery of; the rest goes on", async () => {
    const { callerId, endpointId } = await ownerWithEndpoint();
    const changed = afterEndpointsRead.once(async () => {
      const narrowed = await test.call({
        method: 'PATCH',
        url: `/v1/callers/${callerId}`,
        body: { removed_scopes: ['users:read'] },
      });
      expect(narrowed.status).toBe(200);
      const hidden = await test.call({
        method: 'POST',
        url: '/v1/users',
        body: { name: 'Hidden', email: `hidden.${Date.now()}@example.com` },
      });
      expect(hidden.status).toBe(201);
    });
    // The event whose fan-out reads the endpoint; then one after everything, to wait for.
    await createItem(test, { name: 'Trigger' });
    await changed;
    await createItem(test, { name: 'After' });
    await receiver.waitFor(1, 10_000, (received) => received.event.data.name === 'After');
    await deliveriesWhen(
      test,
      endpointId,
      (listed) =>
        listed.filter((delivery) => delivery.event_type === 'item.created' && delivery.status === 'succeeded')
          .length === 2,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.map((each) => each.event.data.name)).not.toContain('Hidden');
    expect((await typesListed(endpointId)).filter((type) => type === 'user.created')).toHaveLength(1);
  });

  it('the owner deleted right after the endpoint was read: the endpoint is disabled saying why, and the deletion’s event is neither sent nor made a delivery of', async () => {
    const { callerId, endpointId } = await ownerWithEndpoint();
    const changed = afterEndpointsRead.once(async () => {
      expect((await test.call({ method: 'DELETE', url: `/v1/callers/${callerId}` })).status).toBe(204);
    });
    await createItem(test, { name: 'Trigger' });
    await changed;
    const endpoint = await eventually(
      async () => (await test.call({ url: `/v1/webhook-endpoints/${endpointId}` })).json,
      (body) => body.enabled === false,
    );
    expect(endpoint.disabled_reason).toContain(`its owner, caller ${callerId}, no longer exists`);
    // The trigger's delivery (its event committed before the deletion) is made; its turn ends unsent.
    await deliveriesWhen(test, endpointId, (listed) =>
      listed.some((delivery) => delivery.event_type === 'item.created'),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.map((each) => each.event.type)).not.toContain('caller.deleted');
    expect(await typesListed(endpointId)).not.toContain('caller.deleted');
  });

  it('an endpoint made, then a user, right after the dispatcher found no endpoint: the user’s event reaches it (the events passed for want of an endpoint are those before that read)', async () => {
    receiver = await new Receiver().start();
    const changed = afterEndpointsRead.once(async () => {
      await createEndpoint(test, receiver, ['user.created']);
      await createUser(test, { name: 'First' });
    });
    await createItem(test, { name: 'Trigger' });
    await changed;
    const [first] = await receiver.waitFor(1, 5000, (received) => received.event.data.name === 'First');
    expect(first!.event.type).toBe('user.created');
  });
});
