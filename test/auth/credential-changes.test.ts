import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { issueToken, shortLivedToken } from '../helpers/credentials.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { SseClient } from '../helpers/sse.js';

/**
 * Every change to a caller or its key × every way of reading with it, on one instance: a request
 * with the API key, a request with a token rowi issued, an open event stream opened with each, and
 * (for the one change that reaches them, expiry) an external issuer's token. Each change must hold
 * at once here: an answer or event the caller could get right after the change's own answer is one
 * its new access allows. (Other processes and instances: credential-changes.process.test.ts.)
 *
 * Endpoints' webhooks are the events side's own matrix (test/outbox/); NATS consumers are not
 * rowi's callers (docs/events.md).
 */
const AUDIENCE = 'https://rowi.test';
const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };

let test: TestApp;
let base: string;
let issuer: LocalIssuer;
let userId: number;
let itemId: number;

beforeAll(async () => {
  issuer = await startIssuer({ audience: AUDIENCE });
  test = await startApp({
    ROWI_JWT_ISSUER: issuer.url,
    ROWI_JWT_AUDIENCE: AUDIENCE,
    ROWI_JWT_JWKS_URL: issuer.jwksUrl,
  });
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
  userId = (await createUser(test)).user.id;
  itemId = (await createItem(test)).item.id;
  await setStock(test, itemId, 1_000_000);
});
afterAll(async () => {
  await test.close();
  await issuer.close();
});

/** What a stream does after the change: ends with this problem, stops sending these events, or goes on as before. */
type StreamOutcome = { ends: number; type: string } | { hides: 'order.created' | 'caller.created' } | 'goes on';

interface Change {
  condition: string;
  /** What the caller's key may do and for how long, before the change. */
  key?: { expiresInMs: number };
  token?: { expiresInMs: number };
  apply(subject: Subject): Promise<void>;
  /** The request each credential makes afterwards, and its status. */
  request: { url: string; withKey: number; withToken: number };
  keyStream: StreamOutcome;
  tokenStream: StreamOutcome;
}

interface Subject {
  callerId: number;
  keyId: number;
  key: string;
  token: string;
}

const revoke = (subject: Subject) =>
  test.call({ method: 'DELETE', url: `/v1/callers/${subject.callerId}/keys/${subject.keyId}` });
const patch = (subject: Subject, body: Record<string, unknown>) =>
  test.call({
    method: 'PATCH',
    url: `/v1/callers/${subject.callerId}`,
    headers: MERGE_PATCH,
    body: JSON.stringify(body),
  });
const ENDS_401 = { ends: 401, type: '/problems/invalid-credentials' };
const sleepUntil = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));

const CHANGES: Change[] = [
  {
    condition: 'its API key is revoked',
    apply: async (subject) => expect((await revoke(subject)).status).toBe(204),
    // A token outlives the key it was obtained with (docs/security.md): it is the caller's, not the key's.
    request: { url: '/v1/orders', withKey: 401, withToken: 200 },
    keyStream: ENDS_401,
    tokenStream: 'goes on',
  },
  {
    condition: 'its API key expires',
    key: { expiresInMs: 1500 },
    apply: async () => {},
    request: { url: '/v1/orders', withKey: 401, withToken: 200 },
    keyStream: ENDS_401,
    tokenStream: 'goes on',
  },
  {
    condition: 'its token expires',
    token: { expiresInMs: 1500 },
    apply: async () => {},
    request: { url: '/v1/orders', withKey: 200, withToken: 401 },
    keyStream: 'goes on',
    tokenStream: ENDS_401,
  },
  {
    condition: 'orders:read is removed from its scopes',
    apply: async (subject) => expect((await patch(subject, { removed_scopes: ['orders:read'] })).status).toBe(200),
    request: { url: '/v1/orders', withKey: 403, withToken: 403 },
    keyStream: { hides: 'order.created' },
    tokenStream: { hides: 'order.created' },
  },
  {
    condition: 'its role changes from admin to editor',
    apply: async (subject) => expect((await patch(subject, { role: 'editor' })).status).toBe(200),
    request: { url: '/v1/callers', withKey: 403, withToken: 403 },
    keyStream: { hides: 'caller.created' },
    tokenStream: { hides: 'caller.created' },
  },
  {
    condition: 'events:read is removed from its scopes',
    apply: async (subject) => expect((await patch(subject, { removed_scopes: ['events:read'] })).status).toBe(200),
    request: { url: '/v1/events', withKey: 403, withToken: 403 },
    keyStream: { ends: 403, type: '/problems/insufficient-scope' },
    tokenStream: { ends: 403, type: '/problems/insufficient-scope' },
  },
  {
    condition: 'the caller is deleted',
    apply: async (subject) =>
      expect((await test.call({ method: 'DELETE', url: `/v1/callers/${subject.callerId}` })).status).toBe(204),
    request: { url: '/v1/orders', withKey: 401, withToken: 401 },
    keyStream: ENDS_401,
    tokenStream: ENDS_401,
  },
];

let sequence = 0;

/** An order, a caller and then a user, each making one event: what a stream shows of them tells its access. */
async function probeEvents(): Promise<{ orderId: number; callerId: number; userId: number }> {
  const order = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: `probe ${++sequence}`, user_id: userId, lines: [{ item_id: itemId, quantity: 1 }] },
  });
  const caller = await test.call({
    method: 'POST',
    url: '/v1/callers',
    body: { name: `probe-${sequence}-${process.pid}`, role: 'reader' },
  });
  const { user } = await createUser(test);
  expect([order.status, caller.status]).toEqual([201, 201]);
  return { orderId: order.json.id, callerId: caller.json.id, userId: user.id };
}

async function expectStream(
  stream: SseClient,
  outcome: StreamOutcome,
  probe: Awaited<ReturnType<typeof probeEvents>>,
): Promise<void> {
  const sees = (type: string, id: number) =>
    stream.events.some((event) => event.event === type && event.data.data.id === id);
  if (typeof outcome === 'object' && 'ends' in outcome) {
    expect(await stream.waitForClose(3000)).toBe(true);
    expect(stream.endedWith).toMatchObject({ status: outcome.ends, type: outcome.type, instance: '/v1/events/stream' });
    expect(stream.afterEnd).toBe(0);
    expect([
      sees('order.created', probe.orderId),
      sees('caller.created', probe.callerId),
      sees('user.created', probe.userId),
    ]).toEqual([false, false, false]);
    return;
  }
  // Events come in the order they were committed: once the user's is in, the others were sent or never will be.
  expect(await stream.waitUntil((event) => event.event === 'user.created' && event.data.data.id === probe.userId)).toBe(
    true,
  );
  expect(sees('order.created', probe.orderId)).toBe(outcome === 'goes on' || outcome.hides !== 'order.created');
  expect(sees('caller.created', probe.callerId)).toBe(outcome === 'goes on' || outcome.hides !== 'caller.created');
  expect(stream.closed).toBe(false);
}

/** A caller (an admin: it reads orders, callers and users) with a key and a token, each as the change needs it. */
async function subjectFor(change: Change): Promise<Subject> {
  const { caller, key, keyId } = await createCallerWithKey(test, { role: 'admin' });
  const subject = { callerId: caller.id, keyId, key, token: '' };
  if (change.key) {
    const reply = await test.call({
      method: 'POST',
      url: `/v1/callers/${caller.id}/keys`,
      body: { expires_at: new Date(Date.now() + change.key.expiresInMs).toISOString() },
    });
    expect(reply.status).toBe(201);
    Object.assign(subject, { keyId: reply.json.id, key: reply.json.key });
  }
  subject.token = change.token
    ? await shortLivedToken(
        test,
        caller,
        ['events:read', 'orders:read', 'callers:read', 'users:read'],
        change.token.expiresInMs,
      )
    : await issueToken(test, caller, subject.key);
  return subject;
}

const streamWords = (outcome: StreamOutcome) =>
  outcome === 'goes on' ? 'goes on' : 'ends' in outcome ? `ends (${outcome.ends})` : `stops sending ${outcome.hides}`;

describe('a change to a caller or its key, on every way of reading with it', () => {
  for (const change of CHANGES) {
    const { url, withKey, withToken } = change.request;
    it(`GET ${url} (${withKey} with the key, ${withToken} with the token), GET /v1/events/stream (the key's ${streamWords(change.keyStream)}, the token's ${streamWords(change.tokenStream)}) when ${change.condition}`, async () => {
      const subject = await subjectFor(change);
      const expiresAt = Date.now() + (change.key?.expiresInMs ?? change.token?.expiresInMs ?? 0);
      const withKeyHeaders = { 'x-api-key': subject.key };
      const withTokenHeaders = { authorization: `Bearer ${subject.token}` };
      const streams = {
        key: await SseClient.open(`${base}/v1/events/stream`, withKeyHeaders),
        token: await SseClient.open(`${base}/v1/events/stream`, withTokenHeaders),
      };
      expect([streams.key.response.statusCode, streams.token.response.statusCode]).toEqual([200, 200]);
      expect([
        (await test.call({ url, headers: withKeyHeaders })).status,
        (await test.call({ url, headers: withTokenHeaders })).status,
      ]).toEqual([200, 200]);
      // Both streams see everything before the change.
      const before = await probeEvents();
      for (const stream of Object.values(streams)) await expectStream(stream, 'goes on', before);

      await change.apply(subject);
      await sleepUntil(expiresAt + 20);
      // At once: whatever is committed right after the change's answer (or the expiry) is judged by the new access.
      const after = await probeEvents();
      expect([
        (await test.call({ url, headers: withKeyHeaders })).status,
        (await test.call({ url, headers: withTokenHeaders })).status,
      ]).toEqual([withKey, withToken]);
      await expectStream(streams.key, change.keyStream, after);
      await expectStream(streams.token, change.tokenStream, after);
      for (const stream of Object.values(streams)) stream.close();
    });
  }
});

describe('a token of the external issuer', () => {
  // Its subject is no caller of rowi's: no key to revoke, no role to change. Its issuer's word holds
  // until the token expires; after that, neither a request nor a stream goes on with it.
  it('GET /v1/orders 401, GET /v1/events/stream ends (401) when the token expires', async () => {
    const expiresAt = Date.now() + 1500;
    const token = await issuer.sign({
      sub: `robot-${process.pid}`,
      scope: 'events:read orders:read users:read',
      exp: Math.floor(expiresAt / 1000),
    });
    const headers = { authorization: `Bearer ${token}` };
    const stream = await SseClient.open(`${base}/v1/events/stream`, headers);
    expect(stream.response.statusCode).toBe(200);
    expect((await test.call({ url: '/v1/orders', headers })).status).toBe(200);

    await sleepUntil(Math.floor(expiresAt / 1000) * 1000 + 20);
    const after = await probeEvents();
    expect((await test.call({ url: '/v1/orders', headers })).status).toBe(401);
    await expectStream(stream, ENDS_401, after);
  });
});
