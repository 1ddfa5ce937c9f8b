import { openSqliteFile } from '../helpers/sqlite-file.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServer, type RunningServer } from '../helpers/process.js';

/** These tests run the built CLI (`npm test` builds first) and read its database file after it stops. */

const KEY_PATTERN = /^rowi_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$/;

function firstAdminKey(server: RunningServer): string {
  const match = /^ {2}ROWI_KEY=(\S+)$/m.exec(server.stderr());
  if (!match) throw new Error(`no ROWI_KEY line on stderr:\n${server.stderr()}`);
  expect(match[1]).toMatch(KEY_PATTERN);
  return match[1]!;
}

/** Every value of every audit_events row of a stopped server's database, read on a connection of its own. */
async function auditRows(dataFile: string): Promise<Record<string, unknown>[]> {
  const sqlite = await openSqliteFile(dataFile);
  try {
    return sqlite.all('select * from audit_events order by id');
  } finally {
    sqlite.close();
  }
}

/** The secret part of a key: what follows rowi_xxxxxxxx_. */
const secretOf = (key: string) => key.slice('rowi_xxxxxxxx_'.length);

/** The token with one character of its signature changed. */
function tampered(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const middle = Math.floor(signature.length / 2);
  const swapped = signature[middle] === 'A' ? 'B' : 'A';
  return `${header}.${payload}.${signature.slice(0, middle)}${swapped}${signature.slice(middle + 1)}`;
}

describe('secrets never reach the log, stderr or the audit trail (rowi serve, debug log level)', () => {
  let server: RunningServer;
  let adminKey: string;
  const secrets: Record<string, string> = {};
  const statuses: Record<string, number> = {};
  let exitCode: number | null;

  beforeAll(async () => {
    server = await startServer({ env: { ROWI_LOG_LEVEL: 'debug' } });
    adminKey = firstAdminKey(server);
    const base = server.baseUrl;
    const asAdmin = { 'x-api-key': adminKey, 'content-type': 'application/json' };

    const caller = await fetch(`${base}/v1/callers`, {
      method: 'POST',
      headers: asAdmin,
      body: JSON.stringify({ name: 'sales-system', role: 'editor' }),
    });
    const callerId = ((await caller.json()) as { id: number }).id;
    const created = await fetch(`${base}/v1/callers/${callerId}/keys`, {
      method: 'POST',
      headers: asAdmin,
      body: '{}',
    });
    const key = ((await created.json()) as { key: string }).key;
    const tokenReply = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'sales-system', client_secret: key }),
    });
    const token = ((await tokenReply.json()) as { access_token: string }).access_token;
    const badKey = `rowi_${'q'.repeat(8)}_${'Z'.repeat(21)}x${'Y'.repeat(21)}`;
    const badToken = tampered(token);
    Object.assign(secrets, {
      adminKey,
      key,
      token,
      badKey,
      badToken,
      adminSecret: secretOf(adminKey),
      keySecret: secretOf(key),
      signature: token.split('.')[2]!,
    });
    statuses.caller = caller.status;
    statuses.createdKey = created.status;
    statuses.token = tokenReply.status;

    const get = (path: string, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, { headers }).then((reply) => reply.status);
    statuses.withKey = await get('/v1/users', { 'x-api-key': key });
    statuses.withToken = await get('/v1/users', { authorization: `Bearer ${token}` });
    statuses.keyInQuery = await get(`/v1/users?api_key=${key}`);
    statuses.tokenInQuery = await get(`/v1/users?access_token=${token}`);
    statuses.badKey = await get('/v1/users', { 'x-api-key': badKey });
    statuses.tamperedToken = await get('/v1/users', { authorization: `Bearer ${badToken}` });
    statuses.wrongClientSecret = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'sales-system', client_secret: badKey }),
    }).then((reply) => reply.status);
    statuses.basicClient = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`sales-system:${key}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    }).then((reply) => reply.status);

    exitCode = await server.stop('SIGTERM');
  });
  afterAll(async () => {
    await server.stop('SIGKILL');
  });

  it('the requests were answered as arranged, and SIGTERM stopped the server with exit code 0', () => {
    expect(statuses).toEqual({
      caller: 201,
      createdKey: 201,
      token: 200,
      withKey: 200,
      withToken: 200,
      keyInQuery: 400,
      tokenInQuery: 400,
      badKey: 401,
      tamperedToken: 401,
      wrongClientSecret: 401,
      basicClient: 200,
    });
    expect(exitCode).toBe(0);
  });

  it('stdout (the pino log at debug level): no key, no secret part of a key, no token', () => {
    const log = server.stdout();
    expect(log).toMatch(/"msg":"request completed"/);
    expect(log).toMatch(/"msg":"stopped"/);
    for (const [name, secret] of Object.entries(secrets))
      expect(log.includes(secret), `${name} in the log`).toBe(false);
  });

  it('stderr: the first admin key once, on its ROWI_KEY line, and no other secret', () => {
    const lines = server.stderr().split('\n');
    expect(lines.filter((line) => line.includes(adminKey))).toEqual([`  ROWI_KEY=${adminKey}`]);
    const rest = lines.filter((line) => line !== `  ROWI_KEY=${adminKey}`).join('\n');
    for (const [name, secret] of Object.entries(secrets))
      expect(rest.includes(secret), `${name} on stderr`).toBe(false);
  });

  it('audit_events: every request recorded, and no column of any row holds a key, a secret part or a token', async () => {
    const rows = await auditRows(server.dataFile);
    // Two to create the caller and its key, three token requests and six API requests.
    expect(rows.length).toBe(11);
    expect(rows.map((row) => row.path)).toContain('/v1/users');
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        for (const [name, secret] of Object.entries(secrets))
          expect(String(value).includes(secret), `${name} in audit_events.${column}`).toBe(false);
      }
    }
  });
});

describe('graceful shutdown writes the whole audit trail', () => {
  it('SIGTERM: exit 0, and every request made before it has its audit row, though none had been flushed (ROWI_AUDIT_FLUSH_INTERVAL=60000)', async () => {
    const server = await startServer({ env: { ROWI_AUDIT_FLUSH_INTERVAL: '60000' } });
    try {
      const adminKey = firstAdminKey(server);
      const replies = await Promise.all(
        Array.from({ length: 50 }, (_, index) =>
          fetch(`${server.baseUrl}/v1/users${index % 2 === 0 ? '' : '?limit=1'}`, {
            headers: index % 5 === 0 ? {} : { 'x-api-key': adminKey },
          }),
        ),
      );
      expect(replies.map((reply) => reply.status).sort()).toEqual([...Array(40).fill(200), ...Array(10).fill(401)]);
      const requestIds = replies.map((reply) => reply.headers.get('x-request-id')!);
      // Nothing has been written yet.
      expect(await auditRows(server.dataFile)).toEqual([]);

      expect(await server.stop('SIGTERM')).toBe(0);

      const rows = await auditRows(server.dataFile);
      expect(rows).toHaveLength(50);
      expect(rows.map((row) => row.request_id).sort()).toEqual([...requestIds].sort());
    } finally {
      await server.stop('SIGKILL');
    }
  });
});

describe('rowi callers create', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('rowi callers create --name sales-system --role editor: exit 0 and only the key on stdout; the key works as an editor on the running server', async () => {
    const result = await runCli([
      'callers',
      'create',
      '--name',
      'sales-system',
      '--role',
      'editor',
      '--data',
      server.dataFile,
    ]);

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^rowi_[a-z0-9]{8}_[A-Za-z0-9_-]{43}\n$/);
    const key = result.stdout.trim();
    const created = await fetch(`${server.baseUrl}/v1/users`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'From The Cli', email: 'cli.key@example.com' }),
    });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    const refused = await fetch(`${server.baseUrl}${location}`, { method: 'DELETE', headers: { 'x-api-key': key } });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { required_scopes: string[] }).required_scopes).toEqual(['users:delete']);
  });

  it('rowi callers create --role owner: exit 2 with a message naming the roles, nothing on stdout, no caller stored', async () => {
    const result = await runCli(['callers', 'create', '--name', 'crm', '--role', 'owner', '--data', server.dataFile]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/--role must be one of reader, editor, admin/);
    const sqlite = await openSqliteFile(server.dataFile);
    try {
      expect(sqlite.all('select name from callers where name = ?', 'crm')).toEqual([]);
    } finally {
      sqlite.close();
    }
  });

  it('rowi callers create with a name already taken: a non-zero exit with a message, nothing on stdout', async () => {
    const first = await runCli(['callers', 'create', '--name', 'twice', '--role', 'reader', '--data', server.dataFile]);
    expect(first.code).toBe(0);
    const second = await runCli([
      'callers',
      'create',
      '--name',
      'twice',
      '--role',
      'reader',
      '--data',
      server.dataFile,
    ]);
    expect(second.code).not.toBe(0);
    expect(second.code).not.toBeNull();
    expect(second.stdout).toBe('');
    expect(second.stderr).toMatch(/already named twice/);
  });
});
