import { importJWK, SignJWT, type JWK } from 'jose';
import type { TestApp } from './app.js';

/**
 * rowi's own access token for a caller, from POST /oauth/token (client_secret_post), as any client
 * gets one; `fields` adds to the form (user_id: a token acting for that user).
 */
export async function issueToken(
  test: TestApp,
  caller: { name: string },
  key: string,
  fields: Record<string, string> = {},
): Promise<string> {
  const form = new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: caller.name,
    client_secret: key,
    ...fields,
  });
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

/**
 * A token as rowi issues it, for a caller, but expiring `expiresInMs` from now: rowi issues tokens
 * for at least a minute, so the test signs one with rowi's current key, read from its database.
 */
export async function shortLivedToken(
  test: TestApp,
  caller: { id: number; name: string },
  scopes: string[],
  expiresInMs: number,
): Promise<string> {
  const metadata = await test.call({ url: '/.well-known/oauth-authorization-server', key: null });
  const issuer = metadata.json.issuer as string;
  const row = await test.storage.db
    .selectFrom('signing_keys')
    .select(['kid', 'private_jwk'])
    .where('retired_at', 'is', null)
    .executeTakeFirstOrThrow();
  const now = Date.now();
  return new SignJWT({ scope: scopes.join(' '), client_id: caller.name })
    .setProtectedHeader({ alg: 'ES256', kid: row.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setAudience(`${issuer}/v1`)
    .setSubject(String(caller.id))
    .setIssuedAt(Math.floor(now / 1000))
    .setExpirationTime(Math.floor((now + expiresInMs) / 1000))
    .sign(await importJWK(JSON.parse(row.private_jwk) as JWK, 'ES256'));
}
