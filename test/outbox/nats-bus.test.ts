import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { createItem, createUser, setStock } from '../helpers/records.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const NATS_URL = process.env.ROWI_TEST_NATS_URL || undefined;

/** A stream and subjects of this test process alone: test files of both databases run side by side. */
const tag = `t${process.pid}${Date.now().toString(36)}`;

describe.skipIf(NATS_URL === undefined)('the NATS bus (ROWI_NATS_URL)', () => {
  let test: TestApp;
  let proxy: TcpProxy;
  let nats: NatsConnection;
  const subject = `rowitest.${tag}.${process.env.ROWI_TEST_BACKEND ?? 'sqlite'}`;
  const stream = `ROWI_TEST_${tag}_${process.env.ROWI_TEST_BACKEND ?? 'sqlite'}`.toUpperCase();

  beforeAll(async () => {
    const target = new URL(NATS_URL!);
    // Through a proxy that can be switched off: "NATS went away" without touching the shared server.
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 4222) });
    test = await startApp({
      ROWI_NATS_URL: `nats://127.0.0.1:${proxy.port}`,
      ROWI_NATS_SUBJECT: subject,
      ROWI_NATS_STREAM: stream,
    });
    nats = await connect({ servers: NATS_URL! });
  });
  afterAll(async () => {
    await test?.close();
    await jetstreamManager(nats)
      .then((manager) => manager.streams.delete(stream))
      .catch(() => {});
    await nats?.close();
    await proxy?.close();
  });

  /** Every message of the stream so far, in stream order. */
  async function published(atLeast: number, ms = 10_000): Promise<JsMsg[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const manager = await jetstreamManager(nats);
      const info = await manager.streams.info(stream).catch(() => undefined);
      if (info && info.state.messages >= atLeast) {
        const consumer = await jetstream(nats).consumers.get(stream);
        const messages: JsMsg[] = [];
        const batch = await consumer.fetch({ max_messages: info.state.messages, expires: 2000 });
        for await (const message of batch) {
          messages.push(message);
          if (messages.length === info.state.messages) break;
        }
        return messages;
      }
      if (Date.now() > deadline)
        throw new Error(`JetStream holds ${info?.state.messages ?? 0} of ${atLeast} messages after ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('every committed event is published on <subject>.<type> with the event as JSON and its id as Nats-Msg-Id, in outbox order, from the first kept', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 3);
    const order = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'Bus', user_id: user.id, lines: [{ item_id: item.id, quantity: 2 }] },
    });
    expect(order.status).toBe(201);
    // The first admin and its key were made before the bus first ran: published all the same.
    const messages = await published(7);
    expect(messages.map((message) => message.subject)).toEqual(
      [
        'caller.created',
        'api_key.created',
        'user.created',
        'item.created',
        'stock.changed',
        'order.created',
        'stock.changed',
      ].map((type) => `${subject}.${type}`),
    );
    const placed = messages[5]!;
    expect(placed.json()).toMatchObject({
      type: 'order.created',
      path: `/v1/orders/${order.json.id}`,
      data: { id: order.json.id, total: order.json.total },
    });
    expect(placed.headers?.get('Nats-Msg-Id')).toBe((placed.json() as { id: string }).id);
    const stored = (await test.call({ url: `/v1/events/${(placed.json() as { id: string }).id}` })).json;
    expect(placed.json()).toEqual(stored);
  });

  it('NATS away while events are committed: nothing is lost; once it is back the events are published, in order, each once', async () => {
    const before = (await published(7)).length;
    await proxy.stop();
    const names = [];
    for (let index = 0; index < 5; index++)
      names.push((await createUser(test, { name: `While away ${index}` })).user.name);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await proxy.start();
    const messages = await published(before + 5, 20_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const all = await published(before + 5);
    expect(all).toHaveLength(before + 5);
    expect(messages.slice(before).map((message) => (message.json() as { data: { name: string } }).data.name)).toEqual(
      names,
    );
  }, 30_000);
});
