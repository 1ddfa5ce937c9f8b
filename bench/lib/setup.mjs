// Setting up a rowi for loading: seeding it through its API, credentials, copies of its database,
// and where the outside services (PostgreSQL, Redis) are, said without their passwords.
import { execute, openSqliteConnection } from '../../dist/src/db/sqlite-connection.js';
import { URLSearchParams } from 'node:url';

/** One request while setting up, with the server's credentials; any other status than the expected one stops the run. */
export async function send(server, method, path, body, status) {
  const reply = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(await server.credentials()),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: globalThis.AbortSignal.timeout(30_000),
  });
  if (reply.status !== status)
    throw new Error(`setting up: ${method} ${path} answered ${reply.status}, not ${status}: ${await reply.text()}`);
  return reply.json();
}

/** Runs create(index) for every index, 50 at a time: quick, without flooding the server. */
async function inBatches(count, create) {
  const results = [];
  for (let start = 0; start < count; start += 50) {
    results.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(50, count - start) }, (_, offset) => create(start + offset)),
      )),
    );
  }
  return results;
}

export async function seedUsers(server, count) {
  return inBatches(count, (index) =>
    send(server, 'POST', '/v1/users', { name: `Bench User ${index}`, email: `bench${index}@example.com` }, 201),
  );
}

/** Items at 2.50, each with its stock set to quantity (an item is created with none). */
export async function seedItems(server, count, quantity) {
  return inBatches(count, async (index) => {
    const item = await send(
      server,
      'POST',
      '/v1/items',
      { name: `Bench Item ${index}`, sku: `BENCH-${index}`, price: '2.50' },
      201,
    );
    await send(server, 'PUT', `/v1/items/${item.id}/stock`, { quantity }, 200);
    return item;
  });
}

/** An access token from POST /oauth/token (client credentials: the caller's name and one of its keys). */
export async function issueToken(url, clientId, clientSecret) {
  const reply = await fetch(`${url}/oauth/token`, {
    method: 'POST',
    headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    }).toString(),
  });
  if (reply.status !== 200)
    throw new Error(`setting up: POST /oauth/token answered ${reply.status}: ${await reply.text()}`);
  return (await reply.json()).access_token;
}

/** A consistent copy of a SQLite database that a running server has open (WAL included), with the driver rowi uses. */
export async function copyDatabase(from, to) {
  const source = await openSqliteConnection(from, { synchronous: 'full', busyTimeoutMs: 5000 });
  try {
    execute(source.prepare('VACUUM INTO ?'), [to]);
  } finally {
    source.close();
  }
}

/** A PostgreSQL (or Redis) URL without its password and parameters, to print. */
export function describeUrl(text) {
  try {
    const url = new URL(text);
    url.password = '';
    url.search = '';
    return url.toString();
  } catch {
    return 'an invalid URL';
  }
}
