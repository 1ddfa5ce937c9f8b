import { afterEach, describe, expect, it } from 'vitest';
import { callFrom, startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';

/**
 * Failed authentication (docs/security.md "Failed authentication"): the budget is spent where a
 * guess comes from (the client address) and where it is aimed (an API key's public prefix, an
 * OAuth client id); past it, what the refusal covers gets 429 before credentials are checked, but
 * a credential proven valid is checked as usual. Addresses chosen per request (in-process).
 */
const apps: TestApp[] = [];
afterEach(async () => {
  for (const started of apps.splice(0)) await started.close();
});

async function app(): Promise<TestApp> {
  const started = await startApp({
    ROWI_AUTH_FAILURE_LIMIT: '4',
    ROWI_RATE_LIMIT_ANONYMOUS: '0',
    ROWI_RATE_LIMIT_ADMIN: '100000',
    ROWI_RATE_LIMIT_EDITOR: '100000',
  });
  apps.push(started);
  return started;
}

/** A key of the right shape that no caller holds (its prefix too is no caller's). */
const unknownKey = (n: number) => `rowi_zz${String(n).padStart(6, '0')}_${'x'.repeat(43)}`;
/** A guess at the secret of `key`: its public prefix, another secret. */
const guessAt = (key: string, n: number) => `${key.slice(0, 14)}${String(n).padStart(43, 'g')}`;

const users = (test: TestApp, address: string, key: string) =>
  callFrom(test, address, { url: '/v1/users', headers: { 'x-api-key': key } });

describe('failed authentication, by address and by what a guess names', () => {
  it('GET /v1/users: 200 for a valid key from an address over its budget, while a wrong key from it is 429, when the valid key authenticated a request before', async () => {
    const test = await app();
    const partner = await createCallerWithKey(test, { role: 'editor' });
    expect((await users(test, '10.1.1.1', partner.key)).status).toBe(200);
    // Someone else behind the same address sends wrong keys (each a different one).
    for (let n = 0; n < 4; n++) expect((await users(test, '10.1.1.1', unknownKey(n))).status).toBe(401);
    const wrong = await users(test, '10.1.1.1', unknownKey(9));
    expect(expectProblem(wrong, 429, 'rate-limited')).toMatchObject({ policy: 'failed-auth', quota: 4 });
    expect(wrong.json.detail).toMatch(/came from this address/);

    for (let n = 0; n < 3; n++) expect((await users(test, '10.1.1.1', partner.key)).status).toBe(200);
    // A key that never authenticated a request is refused there like a guess, until it has.
    const fresh = await createCallerWithKey(test, { role: 'editor' });
    expectProblem(await users(test, '10.1.1.1', fresh.key), 429, 'rate-limited');
    expect((await users(test, '10.2.2.2', fresh.key)).status).toBe(200);
    expect((await users(test, '10.1.1.1', fresh.key)).status).toBe(200);
  });

  it("GET /v1/users: guesses at one key's secret are 429 once that key's budget is spent, whatever address they come from, while the key itself is served and other keys are not refused, when the guesses come from many addresses", async () => {
    const test = await app();
    const target = await createCallerWithKey(test, { role: 'editor' });
    const bystander = await createCallerWithKey(test, { role: 'editor' });
    expect((await users(test, '10.3.0.1', target.key)).status).toBe(200);
    // Four guesses, each from an address of its own: no address spends its own budget.
    for (let n = 0; n < 4; n++) expect((await users(test, `10.4.0.${n + 1}`, guessAt(target.key, n))).status).toBe(401);
    const guessed = await users(test, '10.4.0.99', guessAt(target.key, 99));
    expect(expectProblem(guessed, 429, 'rate-limited')).toMatchObject({ policy: 'failed-auth' });
    expect(guessed.json.detail).toMatch(/named this API key/);
    expect(Number(guessed.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Refused before the key is looked at: the right secret gets through only as a proven credential.
    expect((await users(test, '10.4.0.98', target.key)).status).toBe(200);
    expect((await users(test, '10.4.0.97', bystander.key)).status).toBe(200);
    expect((await users(test, '10.4.0.96', guessAt(bystander.key, 1))).status).toBe(401);
  });

  it('GET /v1/users: 401 again for a key proven before once it is revoked, and 429 after, when its address is over its budget', async () => {
    const test = await app();
    const revoked = await createCallerWithKey(test, { role: 'editor' });
    expect((await users(test, '10.5.5.5', revoked.key)).status).toBe(200);
    for (let n = 0; n < 4; n++) await users(test, '10.5.5.5', unknownKey(n));
    await test.storage.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date().toISOString() })
      .where('id', '=', revoked.keyId)
      .execute();
    // Credentials are believed for at most 500 ms.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expectProblem(await users(test, '10.5.5.5', revoked.key), 401, 'invalid-credentials');
    expectProblem(await users(test, '10.5.5.5', revoked.key), 429, 'rate-limited');
  });

  it("POST /oauth/token: guesses at one client's secret from many addresses are 429 once that client's budget is spent; its proven secret still gets a token, and the token it gets is served from an address over its budget", async () => {
    const test = await app();
    const form = (secret: string, client = 'admin') =>
      new URLSearchParams({ grant_type: 'client_credentials', client_id: client, client_secret: secret }).toString();
    const token = (address: string, secret: string) =>
      callFrom(test, address, {
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: form(secret),
      });
    expect((await users(test, '10.6.0.1', test.adminKey)).status).toBe(200);
    for (let n = 0; n < 4; n++) expect((await token(`10.7.0.${n + 1}`, unknownKey(n))).status).toBe(401);
    const refused = await token('10.7.0.99', unknownKey(99));
    expect(expectProblem(refused, 429, 'rate-limited').detail).toMatch(/named this client/);
    const issued = await token('10.7.0.98', test.adminKey);
    expect(issued.status).toBe(200);

    // The token's first use is from an address over its budget: rowi issued it, so it is checked.
    for (let n = 0; n < 4; n++) await users(test, '10.8.0.1', unknownKey(n));
    const bearer = await callFrom(test, '10.8.0.1', {
      url: '/v1/users',
      headers: { authorization: `Bearer ${issued.json.access_token as string}` },
    });
    expect(bearer.status).toBe(200);
    expectProblem(
      await callFrom(test, '10.8.0.1', { url: '/v1/users', headers: { authorization: 'Bearer not.a.token' } }),
      429,
      'rate-limited',
    );
  });
});
