import { SignJWT, exportSPKI, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createCallerWithKey } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';
import {
  hmacWithPublicKey,
  partsOf,
  startIssuer,
  tamperedToken,
  unsignedToken,
  type LocalIssuer,
} from '../helpers/issuer.js';

const AUDIENCE = 'https://rowi.test';
/** Scopes that would let a forged token create a user: what the "nothing stored" checks rely on. */
const CREATE_SCOPES = 'users:read users:create';

/**
 * Bearer tokens on the API routes, in-process: tokens of an external issuer (a local one with
 * its own keys and a JWKS over real HTTP) and rowi's own tokens from POST /oauth/token, each
 * accepted when valid and refused, changing nothing, when forged, stale or meant for others.
 */
describe('Authorization: Bearer <JWT>', () => {
  let test: TestApp;
  let issuer: LocalIssuer;
  let editor: Awaited<ReturnType<typeof createCallerWithKey>>;
  /** rowi's own issuer and audience, from its metadata. */
  let own: { issuer: string; audience: string; kid: string; jwk: JWK };

  beforeAll(async () => {
    issuer = await startIssuer({ audience: AUDIENCE });
    test = await startApp({
      ROWI_JWT_ISSUER: issuer.url,
      ROWI_JWT_AUDIENCE: AUDIENCE,
      ROWI_JWT_JWKS_URL: issuer.jwksUrl,
      ROWI_AUDIT_FLUSH_INTERVAL: '50',
    });
    editor = await createCallerWithKey(test, { role: 'editor', name: 'sales-system' });
    const metadata = await test.call({ url: '/.well-known/oauth-authorization-server', key: null });
    await ownToken(); // the first token creates the signing key
    const jwks = await test.call({ url: '/.well-known/jwks.json', key: null });
    const jwk = (jwks.json as { keys: JWK[] }).keys[0]!;
    own = {
      issuer: metadata.json.issuer as string,
      audience: `${metadata.json.issuer as string}/v1`,
      kid: jwk.kid!,
      jwk,
    };
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await test?.close();
    await issuer?.close();
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  /** A token of rowi's own, by client_secret_post, as any client would get it. */
  async function ownToken(scope?: string): Promise<string> {
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: editor.caller.name,
      client_secret: editor.key,
    });
    if (scope !== undefined) form.set('scope', scope);
    const reply = await test.call({
      method: 'POST',
      url: '/oauth/token',
      key: null,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    if (reply.status !== 200) throw new Error(`no token: ${reply.status} ${reply.text}`);
    return reply.json.access_token as string;
  }

  /** rowi's current signing key, read from its database: to forge tokens only rowi could sign. */
  async function ownPrivateKey() {
    const row = await test.storage.db
      .selectFrom('signing_keys')
      .select(['kid', 'private_jwk'])
      .where('kid', '=', own.kid)
      .executeTakeFirstOrThrow();
    return importJWK(JSON.parse(row.private_jwk) as JWK, 'ES256');
  }

  async function ownClaims(overrides: Record<string, unknown> = {}) {
    const now = Math.floor(Date.now() / 1000);
    return {
      iss: own.issuer,
      aud: own.audience,
      sub: String(editor.caller.id),
      client_id: editor.caller.name,
      scope: CREATE_SCOPES,
      iat: now,
      exp: now + 300,
      jti: 'forged',
      ...overrides,
    };
  }

  async function signOwn(overrides: Record<string, unknown> = {}, header: Record<string, unknown> = {}) {
    return new SignJWT(await ownClaims(overrides))
      .setProtectedHeader({ alg: 'ES256', kid: own.kid, typ: 'at+jwt', ...header })
      .sign(await ownPrivateKey());
  }

  /** POST /v1/users with the token: 401 invalid-credentials, a Bearer challenge, no user stored. */
  async function expectRefused(token: string, description: RegExp) {
    const before = await storedUsers(test);
    const reply = await test.call({ method: 'POST', url: '/v1/users', headers: bearer(token), body: buildUser() });
    expectRefusal(reply, description);
    expect(await storedUsers(test)).toEqual(before);
    const read = await test.call({ url: '/v1/users', headers: bearer(token) });
    expectRefusal(read, description);
  }

  function expectRefusal(reply: Reply, description: RegExp) {
    const problem = expectProblem(reply, 401, 'invalid-credentials');
    const challenge = String(reply.headers['www-authenticate']);
    expect(challenge).toMatch(/^Bearer realm="rowi", error="invalid_token", error_description="[^"]+"$/);
    expect(challenge).toMatch(description);
    expect(problem.detail).toMatch(description);
  }

  /**
   * jose refetches an issuer's JWKS on an unknown kid only when its last fetch is older than
   * rowi's cooldown (30 s). Rather than wait, Date.now (which that check reads) is moved past
   * one more cooldown for the duration of `act`; token times (new Date()) stay real.
   */
  let cooldownsPassed = 0;
  async function afterCooldown<T>(act: () => Promise<T>): Promise<T> {
    cooldownsPassed++;
    const offset = cooldownsPassed * 31_000;
    const realNow = Date.now.bind(Date);
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
    try {
      return await act();
    } finally {
      spy.mockRestore();
    }
  }

  describe('tokens of the external issuer', () => {
    it('GET /v1/users: 200 and POST /v1/users: 403 insufficient-scope when the token carries "users:read orders:read"; both audited as external with the subject', async () => {
      const token = await issuer.sign({ sub: 'warehouse-robot', scope: 'users:read orders:read' });
      const before = await storedUsers(test);

      const list = await test.call({ url: '/v1/users', headers: bearer(token) });
      expect(list.status).toBe(200);
      expect(Array.isArray(list.json.data)).toBe(true);

      const create = await test.call({ method: 'POST', url: '/v1/users', headers: bearer(token), body: buildUser() });
      const problem = expectProblem(create, 403, 'insufficient-scope');
      expect(problem.required_scopes).toEqual(['users:create']);
      expect(String(create.headers['www-authenticate'])).toMatch(/error="insufficient_scope".*scope="users:create"/);
      expect(await storedUsers(test)).toEqual(before);

      const events = await auditEventsFor([
        String(list.headers['x-request-id']),
        String(create.headers['x-request-id']),
      ]);
      expect(
        events.map(({ caller_id, caller_name, credential, method, resource, action, status }) => ({
          caller_id,
          caller_name,
          credential,
          method,
          resource,
          action,
          status,
        })),
      ).toEqual([
        {
          caller_id: null,
          caller_name: 'warehouse-robot',
          credential: 'external',
          method: 'GET',
          resource: 'users',
          action: 'read',
          status: 200,
        },
        {
          caller_id: null,
          caller_name: 'warehouse-robot',
          credential: 'external',
          method: 'POST',
          resource: 'users',
          action: 'create',
          status: 403,
        },
      ]);
    });

    it('POST /v1/users: 201 when an ES256 token of the issuer carries users:create (the refusals below are not of every token)', async () => {
      const token = await issuer.sign({ scope: CREATE_SCOPES }, { alg: 'ES256' });
      const reply = await test.call({ method: 'POST', url: '/v1/users', headers: bearer(token), body: buildUser() });
      expect(reply.status).toBe(201);
      expect(await storedUsers(test)).toContainEqual(expect.objectContaining({ id: reply.json.id }));
    });

    it('POST /v1/users: 401 invalid-credentials when the token is unsigned (alg none)', async () => {
      const valid = partsOf(await issuer.sign({ scope: CREATE_SCOPES }));
      await expectRefused(unsignedToken(valid.payload, { kid: issuer.kidOf() }), /algorithm/);
    });

    it("POST /v1/users: 401 invalid-credentials when the token is HS256 with the issuer's public key as secret (algorithm confusion)", async () => {
      const { payload } = partsOf(await issuer.sign({ scope: CREATE_SCOPES }));
      await expectRefused(
        await hmacWithPublicKey(await issuer.publicKeyPem('RS256'), payload, { kid: issuer.kidOf('RS256') }),
        /algorithm/,
      );
    });

    it('POST /v1/users: 401 invalid-credentials when the payload was changed after signing (scope widened)', async () => {
      const token = await issuer.sign({ scope: 'users:read' });
      expect((await test.call({ url: '/v1/users', headers: bearer(token) })).status).toBe(200);
      await expectRefused(tamperedToken(token, { scope: CREATE_SCOPES }), /signature/);
    });

    it('POST /v1/users: 401 invalid-credentials when the token has expired', async () => {
      const now = Math.floor(Date.now() / 1000);
      await expectRefused(await issuer.sign({ scope: CREATE_SCOPES, iat: now - 3600, exp: now - 60 }), /expired/);
    });

    it('POST /v1/users: 401 invalid-credentials when the token is not valid before an hour from now (nbf)', async () => {
      await expectRefused(
        await issuer.sign({ scope: CREATE_SCOPES, nbf: Math.floor(Date.now() / 1000) + 3600 }),
        /not valid yet/,
      );
    });

    it('POST /v1/users: 401 invalid-credentials when the token comes from another issuer', async () => {
      await expectRefused(await issuer.sign({ scope: CREATE_SCOPES, iss: 'https://evil.example' }), /issuer/);
    });

    it('POST /v1/users: 401 invalid-credentials when the token is meant for another audience', async () => {
      await expectRefused(await issuer.sign({ scope: CREATE_SCOPES, aud: 'https://other-service.test' }), /audience/);
    });

    it('POST /v1/users: 401 invalid-credentials when the kid is unknown; the issuer is asked again once, not once per token', async () => {
      await issuer.sign(); // the JWKS has been fetched by the tests above
      expect(issuer.jwksFetches).toBeGreaterThanOrEqual(1);
      const forged = await issuer.sign({ scope: CREATE_SCOPES }, { kid: 'not-published' });
      const before = issuer.jwksFetches;
      await afterCooldown(async () => {
        await expectRefused(forged, /unknown kid/);
        for (let attempt = 0; attempt < 5; attempt++) {
          expectRefusal(await test.call({ url: '/v1/users', headers: bearer(forged) }), /unknown kid/);
        }
      });
      expect(issuer.jwksFetches).toBe(before + 1);
    });

    it("GET /v1/users: 200 with a token of the issuer's new key after it rotated; the JWKS is fetched again", async () => {
      const oldToken = await issuer.sign({ scope: 'users:read' });
      expect((await test.call({ url: '/v1/users', headers: bearer(oldToken) })).status).toBe(200);
      const newKid = await issuer.rotate('RS256');
      const newToken = await issuer.sign({ scope: 'users:read' });
      expect(partsOf(newToken).header.kid).toBe(newKid);
      const before = issuer.jwksFetches;

      const replies = await afterCooldown(async () => [
        await test.call({ url: '/v1/users', headers: bearer(newToken) }),
        await test.call({ url: '/v1/users', headers: bearer(oldToken) }),
      ]);
      expect(replies.map((reply) => reply.status)).toEqual([200, 200]);
      expect(issuer.jwksFetches).toBe(before + 1);
    });
  });

  describe("rowi's own tokens", () => {
    it("POST /v1/users: 201 with an own token signed by rowi's key (the forgeries below differ only in what is wrong)", async () => {
      const reply = await test.call({
        method: 'POST',
        url: '/v1/users',
        headers: bearer(await signOwn()),
        body: buildUser(),
      });
      expect(reply.status).toBe(201);
    });

    it('POST /v1/users: 401 invalid-credentials when an own token narrowed to users:read had its scope widened', async () => {
      const token = await ownToken('users:read');
      expect((await test.call({ url: '/v1/users', headers: bearer(token) })).status).toBe(200);
      await expectRefused(tamperedToken(token, { scope: CREATE_SCOPES }), /signature/);
    });

    it('POST /v1/users: 401 invalid-credentials when an unsigned token (alg none) names rowi as issuer', async () => {
      await expectRefused(unsignedToken(await ownClaims(), { kid: own.kid, typ: 'at+jwt' }), /algorithm/);
    });

    it("POST /v1/users: 401 invalid-credentials when an HS256 token uses rowi's public key as secret", async () => {
      const publicPem = await exportSPKI((await importJWK(own.jwk, 'ES256')) as CryptoKey);
      await expectRefused(
        await hmacWithPublicKey(publicPem, await ownClaims(), { kid: own.kid, typ: 'at+jwt' }),
        /algorithm/,
      );
      await expectRefused(
        await hmacWithPublicKey(JSON.stringify(own.jwk), await ownClaims(), { kid: own.kid, typ: 'at+jwt' }),
        /algorithm/,
      );
    });

    it('POST /v1/users: 401 invalid-credentials when an own token has expired', async () => {
      const now = Math.floor(Date.now() / 1000);
      await expectRefused(await signOwn({ iat: now - 1000, exp: now - 60 }), /expired/);
    });

    it('POST /v1/users: 401 invalid-credentials when an own token is not valid yet (nbf in an hour)', async () => {
      await expectRefused(await signOwn({ nbf: Math.floor(Date.now() / 1000) + 3600 }), /not valid yet/);
    });

    it('POST /v1/users: 401 invalid-credentials when an own token names another audience', async () => {
      await expectRefused(await signOwn({ aud: AUDIENCE }), /audience/);
    });

    it('POST /v1/users: 401 invalid-credentials when an own token is not typed at+jwt (an ID token)', async () => {
      await expectRefused(await signOwn({}, { typ: 'JWT' }), /at\+jwt/);
    });

    it('POST /v1/users: 401 invalid-credentials when an own token names a kid rowi never made', async () => {
      const stranger = await generateKeyPair('ES256');
      const token = await new SignJWT(await ownClaims())
        .setProtectedHeader({ alg: 'ES256', kid: 'made-up', typ: 'at+jwt' })
        .sign(stranger.privateKey);
      await expectRefused(token, /unknown kid/);
    });
  });

  describe('malformed Authorization', () => {
    it('GET /v1/users: 400 malformed-credentials when Authorization is 10 KB long', async () => {
      const reply = await test.call({ url: '/v1/users', headers: bearer('a'.repeat(10 * 1024)) });
      expectProblem(reply, 400, 'malformed-credentials');
      expect(String(reply.headers['www-authenticate'])).toMatch(/error="invalid_request"/);
    });

    it('POST /v1/users: 400 malformed-credentials when Authorization is "Bearer" without a token; nothing stored', async () => {
      const before = await storedUsers(test);
      const reply = await test.call({
        method: 'POST',
        url: '/v1/users',
        headers: { authorization: 'Bearer' },
        body: buildUser(),
      });
      expectProblem(reply, 400, 'malformed-credentials');
      expect(await storedUsers(test)).toEqual(before);
    });

    it('POST /v1/users: 401 invalid-credentials when Authorization is Basic (even with a valid key as password); nothing stored', async () => {
      const before = await storedUsers(test);
      const basic = Buffer.from(`${editor.caller.name}:${editor.key}`).toString('base64');
      const reply = await test.call({
        method: 'POST',
        url: '/v1/users',
        headers: { authorization: `Basic ${basic}` },
        body: buildUser(),
      });
      expectProblem(reply, 401, 'invalid-credentials');
      expect(String(reply.headers['www-authenticate'])).toMatch(/^Bearer realm="rowi", error="invalid_token"/);
      expect(await storedUsers(test)).toEqual(before);
    });
  });

  /** The audit events of these requests, oldest first, once the batched writer has stored them (up to 3 s). */
  async function auditEventsFor(requestIds: string[]) {
    const deadline = Date.now() + 3000;
    for (;;) {
      const reply = await test.call({ url: '/v1/audit-events?limit=100' });
      expect(reply.status).toBe(200);
      const events = (reply.json.data as { request_id: string; id: number }[]).filter((event) =>
        requestIds.includes(event.request_id),
      );
      if (events.length === requestIds.length)
        return events.sort((a, b) => a.id - b.id) as unknown as Record<string, unknown>[];
      if (Date.now() > deadline) throw new Error(`audit events for ${requestIds.join(', ')} not stored within 3 s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
});
