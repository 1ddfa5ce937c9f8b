import { expect } from 'vitest';
import type { TestApp } from './app.js';
import { eventually, type Receiver } from './receiver.js';

/** Receivers on loopback allowed; retries after 0.3 s (a few), so that a test sees them. */
export const WEBHOOK_SETTINGS = {
  ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  ROWI_WEBHOOK_RETRY_SCHEDULE: '0.3,0.3,0.3,0.3',
  ROWI_WEBHOOK_TIMEOUT: '1000',
  ROWI_WEBHOOK_DISABLE_AFTER: '50',
};

export interface Delivery {
  id: number;
  status: string;
  event_id: string;
  event_type: string;
  resource: string | null;
  sequence: number | null;
  attempts: { status_code: number | null; error: string | null; duration_ms: number }[];
}

/** An endpoint for `events` at the receiver, made with `key` (the admin's when none): its id, secret and owner. */
export async function createEndpoint(test: TestApp, receiver: Receiver, events: string[] = ['*'], key?: string) {
  const created = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: receiver.url, events },
    ...(key ? { key } : {}),
  });
  expect(created.status, created.text).toBe(201);
  return created.json as { id: number; secret: string; owner_caller_id: number };
}

export async function deliveriesOf(test: TestApp, endpointId: number): Promise<Delivery[]> {
  return (await test.call({ url: `/v1/webhook-endpoints/${endpointId}/deliveries?limit=500` })).json.data as Delivery[];
}

/**
 * Makes a user as the admin and waits until the receiver has it (a marker), then until no
 * delivery of the receiver's endpoints is pending. The deliveries of different resources go in
 * parallel, but an event is fanned out before the marker when it was committed before it: so
 * whatever was committed before the marker and would be sent has arrived by then; what has not,
 * is not sent.
 */
export async function deliverMarker(test: TestApp, receiver: Receiver, name: string): Promise<void> {
  const made = await test.call({
    method: 'POST',
    url: '/v1/users',
    body: { name, email: `${name.toLowerCase().replace(/\W+/g, '.')}.${Date.now()}@example.com` },
  });
  expect(made.status).toBe(201);
  await receiver.waitFor(
    1,
    10_000,
    (received) => received.event.type === 'user.created' && received.event.data.name === name,
  );
  const endpoints = (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data as {
    id: number;
    url: string;
  }[];
  for (const endpoint of endpoints.filter((listed) => listed.url === receiver.url))
    await eventually(
      async () =>
        (await test.call({ url: `/v1/webhook-endpoints/${endpoint.id}/deliveries?status=pending&limit=1` })).json
          .data as unknown[],
      (pending) => pending.length === 0,
    );
}

/** The types the receiver got after the marker named `after` (all when undefined). */
export function typesAfter(receiver: Receiver, after?: string): string[] {
  const start =
    after === undefined ? 0 : receiver.received.findIndex((received) => received.event.data.name === after) + 1;
  return receiver.received.slice(start).map((received) => received.event.type);
}

/** Waits until the endpoint's deliveries satisfy `done`. */
export function deliveriesWhen(
  test: TestApp,
  endpointId: number,
  done: (deliveries: Delivery[]) => boolean,
): Promise<Delivery[]> {
  return eventually(() => deliveriesOf(test, endpointId), done);
}
