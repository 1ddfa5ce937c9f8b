import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { answer, eventually, Receiver } from '../helpers/receiver.js';
import { createCallerWithKey } from '../helpers/records.js';
import { createEndpoint, deliveriesOf, WEBHOOK_SETTINGS } from '../helpers/webhooks.js';

let test: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  test = await startApp(WEBHOOK_SETTINGS);
  receiver = await new Receiver().start();
});
afterAll(async () => {
  await receiver.stop();
  await test.close();
});

const HOUR = 3_600_000;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const healthOf = (id: number, key?: string) =>
  test.call({ url: `/v1/webhook-endpoints/${id}/health`, ...(key ? { key } : {}) });

/** A disabled endpoint (nothing is sent to it): its deliveries stay as the test stores them. */
async function quietEndpoint(): Promise<number> {
  const created = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: 'https://hooks.example.com/rowi', enabled: false },
  });
  expect(created.status, created.text).toBe(201);
  return created.json.id as number;
}

let events = 0;
/** Stores a delivery of the endpoint made `made` ms ago and last changed `changed` ms ago, with its attempts. */
async function storeDelivery(
  endpointId: number,
  status: 'pending' | 'succeeded' | 'dead',
  made: number,
  changed: number,
  attempts: { ago: number; status_code: number | null; error: string | null }[] = [],
): Promise<number> {
  const event = `evt_${(++events).toString(16).padStart(28, '0')}`;
  const row = await test.storage.db
    .insertInto('webhook_deliveries')
    .values({
      endpoint_id: endpointId,
      event_id: event,
      event_type: 'user.created',
      status,
      attempts: attempts.length,
      next_attempt_at: status === 'pending' ? ago(-HOUR) : null,
      lease_until: null,
      claimed_by: null,
      resource_key: `/v1/users/${events}`,
      sequence: 1,
      created_at: ago(made),
      updated_at: ago(changed),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const id = Number(row.id);
  for (const attempt of attempts)
    await test.storage.db
      .insertInto('webhook_attempts')
      .values({
        delivery_id: id,
        attempted_at: ago(attempt.ago),
        status_code: attempt.status_code,
        duration_ms: 12,
        error: attempt.error,
      })
      .execute();
  return id;
}

describe('GET /v1/webhook-endpoints/{id}/health', () => {
  it('GET /v1/webhook-endpoints/{id}/health: 200 with zeros and nulls, never cached, when the endpoint has no delivery', async () => {
    const id = await quietEndpoint();
    const before = Date.now();
    const reply = await healthOf(id);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.headers['cache-control']).toBe('private, no-store');
    expect(reply.json).toEqual({
      endpoint_id: id,
      window_start: expect.any(String),
      deliveries: { pending: 0, succeeded: 0, dead: 0 },
      attempts: { total: 0, succeeded: 0, failed: 0 },
      success_rate: null,
      lag_ms: null,
      last_success_at: null,
      last_failure: null,
    });
    const windowStart = Date.parse(reply.json.window_start);
    expect(windowStart).toBeGreaterThanOrEqual(before - 24 * HOUR);
    expect(windowStart).toBeLessThanOrEqual(Date.now() - 24 * HOUR);
  });

  it("GET /v1/webhook-endpoints/{id}/health: counts the pending deliveries, the last day's successes, dead letters and attempts, when some are older than a day", async () => {
    const id = await quietEndpoint();
    const other = await quietEndpoint();
    // Stored in the order they were made, as rowi makes them (ids in that order).
    await storeDelivery(id, 'dead', 48 * HOUR, 48 * HOUR);
    // Waiting since 40 hours, its last attempt 39 hours ago: pending, but neither it nor its attempt in the window.
    await storeDelivery(id, 'pending', 40 * HOUR, 39 * HOUR, [
      { ago: 39 * HOUR, status_code: 500, error: 'answered 500' },
    ]);
    await storeDelivery(id, 'succeeded', 30 * HOUR, 30 * HOUR, [{ ago: 30 * HOUR, status_code: 200, error: null }]);
    await storeDelivery(id, 'dead', 4 * HOUR, 2 * HOUR, [
      { ago: 3 * HOUR, status_code: null, error: 'no answer within 1000 ms' },
      { ago: 2 * HOUR, status_code: null, error: 'no answer within 1000 ms' },
    ]);
    const lastSuccess = await storeDelivery(id, 'succeeded', 3 * HOUR, 1 * HOUR, [
      { ago: 2 * HOUR, status_code: 500, error: 'answered 500' },
      { ago: 1 * HOUR, status_code: 204, error: null },
    ]);
    const failing = await storeDelivery(id, 'pending', 10 * 60_000, 5 * 60_000, [
      { ago: 5 * 60_000, status_code: 503, error: 'answered 503' },
    ]);
    // Another endpoint's deliveries count for it alone.
    await storeDelivery(other, 'succeeded', 1 * HOUR, 1 * 60_000, [{ ago: 60_000, status_code: 200, error: null }]);
    await storeDelivery(other, 'pending', 50 * HOUR, 50 * HOUR);

    const reply = await healthOf(id);

    expect(reply.status, reply.text).toBe(200);
    const health = reply.json;
    expect(health.deliveries).toEqual({ pending: 2, succeeded: 1, dead: 1 });
    expect(health.attempts).toEqual({ total: 5, succeeded: 1, failed: 4 });
    expect(health.success_rate).toBe(0.2);
    expect(health.lag_ms).toBeGreaterThanOrEqual(40 * HOUR);
    expect(health.lag_ms).toBeLessThan(40 * HOUR + 60_000);
    const stored = (await deliveriesOf(test, id)).find((delivery) => delivery.id === lastSuccess)!;
    expect(health.last_success_at).toBe((stored.attempts[1] as { attempted_at?: string }).attempted_at);
    expect(health.last_failure).toEqual({
      at: expect.any(String),
      delivery_id: failing,
      status_code: 503,
      error: 'answered 503',
    });
    expect(Date.parse(health.last_failure.at)).toBeGreaterThan(Date.now() - 6 * 60_000);
  });

  it('GET /v1/webhook-endpoints/{id}/health: a success and a failure of a real receiver, when it answers 204 and then 500', async () => {
    const endpoint = await createEndpoint(test, receiver, ['user.created']);
    receiver.behaviour = answer(204);
    const ping = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/ping` });
    expect(ping.status).toBe(202);
    const succeeded = await eventually(
      async () => (await healthOf(endpoint.id)).json,
      (health) => health.deliveries.succeeded === 1,
    );
    expect(succeeded).toMatchObject({
      deliveries: { pending: 0, succeeded: 1, dead: 0 },
      attempts: { total: 1, succeeded: 1, failed: 0 },
      success_rate: 1,
      lag_ms: null,
      last_failure: null,
    });
    const [delivery] = await deliveriesOf(test, endpoint.id);
    expect(succeeded.last_success_at).toBe((delivery!.attempts[0] as { attempted_at?: string }).attempted_at);

    receiver.behaviour = answer(500);
    await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/ping` });
    const failed = await eventually(
      async () => (await healthOf(endpoint.id)).json,
      // Its queries read one after another: wait until the failure is in every count.
      (health) => health.last_failure !== null && health.attempts.failed >= 1,
    );
    expect(failed.deliveries.pending + failed.deliveries.dead).toBe(1);
    expect(failed.attempts.failed).toBeGreaterThanOrEqual(1);
    expect(failed.success_rate).toBeLessThan(1);
    expect(failed.last_failure).toMatchObject({ status_code: 500, error: 'answered 500' });
    expect(failed.last_success_at).toBe(succeeded.last_success_at);
    receiver.behaviour = answer(204);
  });

  it('GET /v1/webhook-endpoints/{id}/health: 404 when there is no such endpoint', async () => {
    expectProblem(await healthOf(999_999), 404, 'not-found');
  });

  it('GET /v1/webhook-endpoints/{id}/health: 403 for a caller without webhook-endpoints:read', async () => {
    const id = await quietEndpoint();
    const { key } = await createCallerWithKey(test, { role: 'reader' });
    expectProblem(await healthOf(id, key), 403, 'insufficient-scope');
  });
});
