import { decodeJwt, decodeProtectedHeader } from 'jose';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServer, type RunningServer } from '../helpers/process.js';

/**
 * OAuth 2.0 client credentials (RFC 6749 §4.4) against `rowi serve` over a real socket, with a
 * real OAuth client nobody here wrote (oauth4webapi): discovery, both client authentication
 * methods, the tokens (RFC 9068), scope narrowing, the §5.2 errors, the token lifetime
 * setting, signing-key rotation by the CLI while the server runs, and callers changed or
 * deleted after their token was issued.
 */
const FORM = 'application/x-www-form-urlencoded';
/** Lets oauth4webapi talk plain HTTP: the server listens on loopback only. */
const insecure = { [oauth.allowInsecureRequests]: true };

interface Editor {
  id: number;
  name: string;
  key: string;
  keyId: number;
}

/** The first admin key, printed once on stderr after "listening" is logged. */
async function adminKeyOf(server: RunningServer): Promise<string> {
  const given = (server as RunningServer & { adminKey?: string }).adminKey;
  if (given) return given;
  const deadline = Date.now() + 5000;
  for (;;) {
    const match = /ROWI_KEY=(rowi_\S+)/.exec(server.stderr());
    if (match) return match[1]!;
    if (Date.now() > deadline) throw new Error(`no ROWI_KEY on stderr:\n${server.stderr()}`);
    await sleep(20);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Retries `attempt` until it returns something other than undefined, for at most `ms`. */
async function within<T>(ms: number, attempt: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    const result = await attempt();
    if (result !== undefined || Date.now() > deadline) return result;
    await sleep(50);
  }
}

async function discover(server: RunningServer) {
  const issuer = new URL(server.baseUrl);
  return oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
  );
}

async function clientCredentials(
  as: oauth.AuthorizationServer,
  client: Editor,
  auth: 'basic' | 'post',
  scope?: string,
) {
  const clientAuth = auth === 'basic' ? oauth.ClientSecretBasic(client.key) : oauth.ClientSecretPost(client.key);
  const parameters: Record<string, string> = scope === undefined ? {} : { scope };
  const response = await oauth.clientCredentialsGrantRequest(
    as,
    { client_id: client.name },
    clientAuth,
    parameters,
    insecure,
  );
  return oauth.processClientCredentialsResponse(as, { client_id: client.name }, response);
}

describe('OAuth 2.0 client credentials, over a real socket', () => {
  let server: RunningServer;
  let adminKey: string;
  let as: oauth.AuthorizationServer;
  let editor: Editor;

  const api = (path: string, init: RequestInit & { key?: string; token?: string } = {}) => {
    const headers = new Headers(init.headers);
    if (init.key !== undefined) headers.set('x-api-key', init.key);
    if (init.token !== undefined) headers.set('authorization', `Bearer ${init.token}`);
    if (typeof init.body === 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
    return fetch(`${server.baseUrl}${path}`, { ...init, headers });
  };

  /** A caller and a key, made through the API with the admin key. */
  async function createCaller(name: string, role = 'editor'): Promise<Editor> {
    const caller = await api('/v1/callers', { method: 'POST', key: adminKey, body: JSON.stringify({ name, role }) });
    expect(caller.status).toBe(201);
    const { id } = (await caller.json()) as { id: number };
    const key = await api(`/v1/callers/${id}/keys`, { method: 'POST', key: adminKey, body: '{}' });
    expect(key.status).toBe(201);
    const created = (await key.json()) as { id: number; key: string };
    return { id, name, key: created.key, keyId: created.id };
  }

  /** POST /oauth/token by hand, for requests a well-behaved client library will not send. */
  function tokenRequest(form: string, basic?: [string, string]) {
    const headers: Record<string, string> = { 'content-type': FORM };
    if (basic)
      headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic[0])}:${encodeURIComponent(basic[1])}`).toString('base64')}`;
    return fetch(`${server.baseUrl}/oauth/token`, { method: 'POST', headers, body: form });
  }

  async function expectOAuthError(response: Response, status: number, error: string) {
    const body = (await response.json()) as Record<string, unknown>;
    expect({ status: response.status, error: body.error }).toEqual({ status, error });
    expect(Object.keys(body).sort()).toEqual(['error', 'error_description']);
    expect(typeof body.error_description).toBe('string');
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(response.headers.get('cache-control')).toBe('no-store');
    return body;
  }

  const jwks = async () =>
    (
      (await (await fetch(`${server.baseUrl}/.well-known/jwks.json`)).json()) as {
        keys: { kid: string; kty: string; alg: string; crv?: string }[];
      }
    ).keys;
  const postUser = (token: string, email: string) =>
    api('/v1/users', { method: 'POST', token, body: JSON.stringify({ name: 'Token User', email }) });

  beforeAll(async () => {
    server = await startServer();
    adminKey = await adminKeyOf(server);
    editor = await createCaller('sales-system');
    as = await discover(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  // First in this file: no token has been issued by this server yet.
  it('GET /.well-known/jwks.json: one ES256 key published from the start, before any token is issued; the first token is signed with it and the set is unchanged', async () => {
    const before = await jwks();
    expect(before).toEqual([
      expect.objectContaining({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: expect.any(String) }),
    ]);
    const token = await clientCredentials(as, editor, 'basic', 'users:read');
    expect(decodeProtectedHeader(token.access_token).kid).toBe(before[0]!.kid);
    expect(await jwks()).toEqual(before);
  });

  it("GET /.well-known/oauth-authorization-server: oauth4webapi discovers rowi; the issuer is the server's origin", () => {
    expect(as.issuer).toBe(server.baseUrl);
    expect(as.token_endpoint).toBe(`${server.baseUrl}/oauth/token`);
    expect(as.jwks_uri).toBe(`${server.baseUrl}/.well-known/jwks.json`);
    expect(as.grant_types_supported).toEqual(['client_credentials']);
    expect(as.token_endpoint_auth_methods_supported).toEqual(['client_secret_basic', 'client_secret_post']);
  });

  it('POST /oauth/token: a token by client_secret_basic and one by client_secret_post; each reads GET /v1/users', async () => {
    for (const method of ['basic', 'post'] as const) {
      const token = await clientCredentials(as, editor, method);
      expect(token.token_type).toBe('bearer');
      expect(token.expires_in).toBe(900);
      expect(token.scope!.split(' ')).toContain('users:create');
      const users = await api('/v1/users', { token: token.access_token });
      expect(users.status).toBe(200);
    }
  });

  it('POST /oauth/token: the token is an RFC 9068 JWT (at+jwt, ES256, a published kid) with iss, aud, sub, client_id, scope, iat, exp = iat + 900, jti; no-store', async () => {
    const response = await tokenRequest(
      new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: editor.name,
        client_secret: editor.key,
      }).toString(),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const { access_token: token, scope } = (await response.json()) as { access_token: string; scope: string };

    const header = decodeProtectedHeader(token);
    expect(header).toEqual({ alg: 'ES256', typ: 'at+jwt', kid: expect.any(String) });
    const published = await jwks();
    expect(published.find((key) => key.kid === header.kid)).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256' });

    const claims = decodeJwt(token);
    expect(claims).toEqual({
      iss: server.baseUrl,
      aud: `${server.baseUrl}/v1`,
      sub: String(editor.id),
      client_id: editor.name,
      scope,
      iat: expect.any(Number),
      exp: claims.iat! + 900,
      jti: expect.any(String),
    });
    expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(60);
    expect(scope.split(' ').sort()).toEqual(
      [
        ...['items', 'orders', 'stock', 'users', 'weather'].flatMap((data) => [
          `${data}:create`,
          `${data}:read`,
          `${data}:update`,
        ]),
        'events:read',
        'operations:read',
        'orders:cancel',
        'operations:update',
      ].sort(),
    );
  });

  it('POST /oauth/token: scope=users:read gives a token that may GET /v1/users but gets 403 insufficient-scope on POST /v1/users', async () => {
    const token = await clientCredentials(as, editor, 'basic', 'users:read');
    expect(token.scope).toBe('users:read');
    expect(decodeJwt(token.access_token).scope).toBe('users:read');
    expect((await api('/v1/users', { token: token.access_token })).status).toBe(200);

    const email = 'narrowed@example.com';
    const create = await postUser(token.access_token, email);
    expect(create.status).toBe(403);
    expect(create.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await create.json()).toMatchObject({
      type: '/problems/insufficient-scope',
      required_scopes: ['users:create'],
    });
    const stored = (await (await api(`/v1/users?email=${email}`, { key: adminKey })).json()) as { data: unknown[] };
    expect(stored.data).toEqual([]);
  });

  it('POST /oauth/token: 400 invalid_scope when the caller asks for a scope it does not hold (oauth4webapi sees the error)', async () => {
    const refused = await clientCredentials(as, editor, 'post', 'users:read users:delete').catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(oauth.ResponseBodyError);
    const error = refused as oauth.ResponseBodyError;
    expect({ status: error.status, error: error.error }).toEqual({ status: 400, error: 'invalid_scope' });
    expect(error.error_description).toContain('users:delete');
    expect(error.response.headers.get('cache-control')).toBe('no-store');
  });

  describe('RFC 6749 §5.2 errors', () => {
    const form = (fields: Record<string, string>) =>
      new URLSearchParams({ grant_type: 'client_credentials', ...fields }).toString();

    it('POST /oauth/token: 401 invalid_client with WWW-Authenticate Basic when the secret sent by Basic is wrong', async () => {
      const wrong = `${editor.key.slice(0, -4)}AAAA`;
      // oauth4webapi reports a 401 with a challenge as the challenge, before the body.
      const refused = await clientCredentials(as, { ...editor, key: wrong }, 'basic').catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(oauth.WWWAuthenticateChallengeError);
      const challenge = refused as oauth.WWWAuthenticateChallengeError;
      expect(challenge.status).toBe(401);
      expect(challenge.cause.map(({ scheme, parameters }) => ({ scheme, realm: parameters.realm }))).toEqual([
        { scheme: 'basic', realm: 'rowi' },
      ]);
      await expectOAuthError(challenge.response, 401, 'invalid_client');

      const response = await tokenRequest(form({}), [editor.name, wrong]);
      await expectOAuthError(response, 401, 'invalid_client');
      expect(response.headers.get('www-authenticate')).toMatch(/^Basic realm="rowi"/);
    });

    it('POST /oauth/token: 401 invalid_client when the client_id is unknown (the secret being a valid key of another caller)', async () => {
      await expectOAuthError(
        await tokenRequest(form({ client_id: 'no-such-system', client_secret: editor.key })),
        401,
        'invalid_client',
      );
      await expectOAuthError(await tokenRequest(form({}), ['no-such-system', editor.key]), 401, 'invalid_client');
    });

    it('POST /oauth/token: 400 invalid_request when grant_type is missing', async () => {
      await expectOAuthError(
        await tokenRequest(new URLSearchParams({ client_id: editor.name, client_secret: editor.key }).toString()),
        400,
        'invalid_request',
      );
    });

    it('POST /oauth/token: 400 unsupported_grant_type when grant_type is password', async () => {
      const response = await tokenRequest(
        new URLSearchParams({
          grant_type: 'password',
          username: 'x',
          password: 'y',
          client_id: editor.name,
          client_secret: editor.key,
        }).toString(),
      );
      await expectOAuthError(response, 400, 'unsupported_grant_type');
    });

    it('POST /oauth/token: 400 invalid_request when the client authenticates by Basic and by client_secret in the form', async () => {
      await expectOAuthError(
        await tokenRequest(form({ client_secret: editor.key }), [editor.name, editor.key]),
        400,
        'invalid_request',
      );
    });

    it('POST /oauth/token: 400 invalid_request when a parameter is repeated', async () => {
      const body = `${form({ client_id: editor.name, client_secret: editor.key })}&scope=users:read&scope=users:create`;
      const response = await tokenRequest(body);
      const error = await expectOAuthError(response, 400, 'invalid_request');
      expect(error.error_description).toContain('scope');
    });

    it.each([
      ['a JSON body', 'application/json', JSON.stringify({ grant_type: 'client_credentials' })],
      ['an XML body', 'application/xml', '<token><grant_type>client_credentials</grant_type></token>'],
      ['a text body', 'text/plain', 'grant_type=client_credentials'],
    ])(
      'POST /oauth/token with %s: 400 invalid_request (RFC 6749 §5.2), not a 415 problem',
      async (_what, type, body) => {
        const response = await fetch(`${server.baseUrl}/oauth/token`, {
          method: 'POST',
          headers: { 'content-type': type },
          body,
        });
        const error = await expectOAuthError(response, 400, 'invalid_request');
        expect(error.error_description).toContain('application/x-www-form-urlencoded');
      },
    );

    it('the OpenAPI document lists for POST /oauth/token the RFC 6749 errors (400, 401) and neither 415 nor 422', async () => {
      const document = (await (await fetch(`${server.baseUrl}/v1/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      };
      const statuses = Object.keys(document.paths['/oauth/token']!.post!.responses);
      expect(statuses).toEqual(expect.arrayContaining(['200', '400', '401']));
      expect(statuses).not.toContain('415');
      expect(statuses).not.toContain('422');
    });

    it('POST /oauth/token: 401 invalid_client when the secret is a revoked key of the caller', async () => {
      const created = await api(`/v1/callers/${editor.id}/keys`, { method: 'POST', key: adminKey, body: '{}' });
      const { id, key } = (await created.json()) as { id: number; key: string };
      expect((await tokenRequest(form({}), [editor.name, key])).status).toBe(200);
      expect((await api(`/v1/callers/${editor.id}/keys/${id}`, { method: 'DELETE', key: adminKey })).status).toBe(204);
      await expectOAuthError(
        await tokenRequest(form({ client_id: editor.name, client_secret: key })),
        401,
        'invalid_client',
      );
    });
  });

  it('POST /oauth/token: expires_in and exp follow ROWI_TOKEN_LIFETIME=60', async () => {
    const short = await startServer({ env: { ROWI_TOKEN_LIFETIME: '60' } });
    try {
      const shortAdminKey = await adminKeyOf(short);
      const shortAs = await discover(short);
      const token = await clientCredentials(shortAs, { id: 1, name: 'admin', key: shortAdminKey, keyId: 1 }, 'basic');
      expect(token.expires_in).toBe(60);
      const claims = decodeJwt(token.access_token);
      expect(claims.exp! - claims.iat!).toBe(60);
    } finally {
      await short.stop();
    }
  });

  it('rowi signing-keys rotate while the server runs: the JWKS lists the new and the old key; old tokens still work; new tokens carry the new kid', async () => {
    const before = await clientCredentials(as, editor, 'basic', 'users:read');
    const oldKid = decodeProtectedHeader(before.access_token).kid!;

    const rotated = await runCli(['signing-keys', 'rotate'], server.database);
    expect(rotated).toMatchObject({ code: 0 });
    const newKid = rotated.stdout.trim();
    expect(newKid).toMatch(/^[0-9a-f-]{36}$/);
    expect(newKid).not.toBe(oldKid);

    // The server reloads its keys at most once a second; new tokens may carry the old kid until then.
    const after = await within(2000, async () => {
      const token = await clientCredentials(as, editor, 'post', 'users:read');
      return decodeProtectedHeader(token.access_token).kid === newKid ? token : undefined;
    });
    expect(after && decodeProtectedHeader(after.access_token).kid).toBe(newKid);
    expect((await jwks()).map((key) => key.kid).sort()).toEqual([newKid, oldKid].sort());
    expect((await api('/v1/users', { token: after!.access_token })).status).toBe(200);
    expect((await api('/v1/users', { token: before.access_token })).status).toBe(200);
  });

  it("PATCH /v1/callers/{id} to role reader: the caller's existing token loses the create scopes (403 on POST /v1/users) within 1 s; DELETE: the token gets 401", async () => {
    const caller = await createCaller('crm-system');
    const token = (await clientCredentials(as, caller, 'basic')).access_token;
    expect((await postUser(token, 'before.demotion@example.com')).status).toBe(201);

    const demoted = await api(`/v1/callers/${caller.id}`, {
      method: 'PATCH',
      key: adminKey,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ role: 'reader' }),
    });
    expect(demoted.status).toBe(200);
    const refused = await within(1000, async () => {
      const reply = await postUser(token, `after.demotion.${Date.now()}@example.com`);
      return reply.status === 403 ? reply : undefined;
    });
    expect(refused?.status).toBe(403);
    expect(await refused!.json()).toMatchObject({
      type: '/problems/insufficient-scope',
      required_scopes: ['users:create'],
    });
    expect((await api('/v1/users', { token })).status).toBe(200);
    const stored = (await (await api('/v1/users?limit=100', { key: adminKey })).json()) as {
      data: { email: string }[];
    };
    expect(stored.data.map((user) => user.email).filter((email) => email.includes('demotion'))).toEqual([
      'before.demotion@example.com',
    ]);

    expect((await api(`/v1/callers/${caller.id}`, { method: 'DELETE', key: adminKey })).status).toBe(204);
    const gone = await within(1000, async () => {
      const reply = await api('/v1/users', { token });
      return reply.status === 401 ? reply : undefined;
    });
    expect(gone?.status).toBe(401);
    expect(gone!.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
    expect(await gone!.json()).toMatchObject({ type: '/problems/invalid-credentials' });
  });
});
