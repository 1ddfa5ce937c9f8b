import { afterEach, describe, expect, it, vi } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { keptLog, type LogLine } from '../helpers/log.js';
import { expectProblem } from '../helpers/problems.js';

/**
 * The external issuer's key server down (src/auth/issuer-keys.ts): a token rowi could not check is
 * answered 503 issuer-unavailable, not 401, and spends nothing of the address's failed
 * authentications; the key server is asked at most once every 30 s, by one fetch that waiting
 * requests share, for at most 3 s; a key set fetched earlier goes on verifying meanwhile.
 */
const AUDIENCE = 'https://rowi-outage.test';

let issuer: LocalIssuer;
let test: TestApp;
let log: LogLine[];

async function start(settings: Record<string, string> = {}) {
  issuer = await startIssuer({ audience: AUDIENCE });
  const kept = keptLog('info');
  log = kept.log;
  test = await startApp(
    { ROWI_JWT_ISSUER: issuer.url, ROWI_JWT_AUDIENCE: AUDIENCE, ROWI_JWT_JWKS_URL: issuer.jwksUrl, ...settings },
    kept.logger,
  );
}

afterEach(async () => {
  vi.restoreAllMocks();
  await test?.close();
  await issuer?.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Runs `act` with the clock `ms` ahead, as if that much time had passed. */
async function later<T>(ms: number, act: () => Promise<T>): Promise<T> {
  const realNow = Date.now.bind(Date);
  const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + ms);
  try {
    return await act();
  } finally {
    spy.mockRestore();
  }
}

const keyServerLines = () => log.filter((line) => /key set/.test(line.msg));

describe("the external issuer's key server down", () => {
  it('GET /v1/users: 503 issuer-unavailable with Retry-After when the key server answers 500 and rowi holds none of its keys; 20 such tokens do not lock the address out, and the key server is asked once', async () => {
    await start({ ROWI_AUTH_FAILURE_LIMIT: '10' });
    issuer.answerJwksWith(500);
    const token = await issuer.sign({ scope: 'users:read' });
    for (let attempt = 0; attempt < 20; attempt++) {
      const reply = await test.call({ url: '/v1/users', headers: bearer(token) });
      const problem = expectProblem(reply, 503, 'issuer-unavailable');
      expect(problem.detail).toMatch(/it answered 500/);
      expect(Number(reply.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(reply.headers['retry-after'])).toBeLessThanOrEqual(30);
      expect(reply.headers['www-authenticate']).toBeUndefined();
    }
    expect(issuer.jwksFetches).toBe(1);
    // The address spent nothing of its failed-authentication budget: its valid key still works.
    expect((await test.call({ url: '/v1/users' })).status).toBe(200);
    expect(keyServerLines()).toMatchObject([
      { level: 40, msg: expect.stringMatching(/^could not fetch the external issuer's key set: it answered 500; /) },
    ]);
    expect(log.filter((line) => line.level >= 50)).toEqual([]);

    // 30 s on, the key server is asked again; it answers now, and the token is accepted.
    issuer.answerJwksWith('keys');
    const reply = await later(31_000, () => test.call({ url: '/v1/users', headers: bearer(token) }));
    expect(reply.status).toBe(200);
    expect(issuer.jwksFetches).toBe(2);
    expect(keyServerLines().at(-1)).toMatchObject({ level: 30, msg: "the external issuer's key set is fetched again" });
  });

  it('GET /v1/users: 200 with a token signed by a key fetched earlier while the key server answers 500, past the key set’s 10 minutes; a kid it lacks is 503, not 401', async () => {
    await start();
    const token = await issuer.sign({ scope: 'users:read' });
    expect((await test.call({ url: '/v1/users', headers: bearer(token) })).status).toBe(200);
    issuer.answerJwksWith(500);
    // Tokens that are still valid eleven minutes on.
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const unknownKid = await issuer.sign({ scope: 'users:read', exp }, { kid: 'rotated-meanwhile' });
    const freshToken = await issuer.sign({ scope: 'users:read', exp, jti: 'another' });
    const replies = await later(11 * 60_000, async () => [
      await test.call({ url: '/v1/users', headers: bearer(freshToken) }),
      await test.call({ url: '/v1/users', headers: bearer(unknownKid) }),
    ]);
    expect(replies[0]!.status).toBe(200);
    expectProblem(replies[1]!, 503, 'issuer-unavailable');
  });

  it('GET /v1/users: a key server that never answers is waited for at most 3 s, by one fetch that concurrent requests share; requests after it are answered 503 at once', async () => {
    await start();
    issuer.answerJwksWith('never');
    const tokens = await Promise.all([1, 2, 3, 4, 5].map((n) => issuer.sign({ scope: 'users:read', jti: `t${n}` })));
    const started = performance.now();
    const replies = await Promise.all(tokens.map((token) => test.call({ url: '/v1/users', headers: bearer(token) })));
    const waited = performance.now() - started;
    for (const reply of replies) expectProblem(reply, 503, 'issuer-unavailable');
    expect(replies[0]!.json.detail).toMatch(/no answer within 3000 ms/);
    expect(waited).toBeGreaterThan(2900);
    expect(waited).toBeLessThan(4500);
    expect(issuer.jwksFetches).toBe(1);

    const next = performance.now();
    expectProblem(await test.call({ url: '/v1/users', headers: bearer(tokens[0]!) }), 503, 'issuer-unavailable');
    expect(performance.now() - next).toBeLessThan(500);
    expect(issuer.jwksFetches).toBe(1);
  });
});
