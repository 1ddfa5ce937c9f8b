import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { migrationNames } from '../helpers/migrations.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli, serverPool, startServer, tempDataFile, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';

/** These tests run the built CLI (`npm test` builds first) over real loopback sockets. */

/** Servers a test started itself; one still running after the test (it failed before stopping it) is killed. */
const { serve, killAll } = serverPool();
afterEach(killAll);

describe('rowi serve, over a real socket', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('creates and migrates the database on first start, logs "listening" with the base URL and prints a curl line', () => {
    expect(existsSync(server.dataFile)).toBe(true);
    expect(server.stdout()).toMatch(/"msg":"database migrated"/);
    expect(server.stdout()).toMatch(new RegExp(`"msg":"listening on ${server.baseUrl}/v1"`));
    expect(server.stderr()).toContain(
      `curl -s -X POST ${server.baseUrl}/v1/users -H "X-API-Key: $ROWI_KEY" -H 'Content-Type: application/json'`,
    );
  });

  it('POST then GET /v1/users/{id} over HTTP/1.1 with keep-alive', async () => {
    const created = await fetch(`${server.baseUrl}/v1/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': server.adminKey },
      body: JSON.stringify({ name: 'Socket User', email: 'socket@example.com' }),
    });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    const read = await fetch(`${server.baseUrl}${location}`, {
      headers: { accept: 'application/xml', 'x-api-key': server.adminKey },
    });
    expect(read.status).toBe(200);
    expect(read.headers.get('content-type')).toBe('application/xml; charset=utf-8');
    expect(await read.text()).toContain('<name>Socket User</name>');
  });

  it('a duplicate email under concurrent POSTs: exactly one 201, the rest 409', async () => {
    const replies = await Promise.all(
      Array.from({ length: 30 }, (_, index) =>
        fetch(`${server.baseUrl}/v1/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': server.adminKey },
          body: JSON.stringify({ name: `Concurrent ${index}`, email: 'same.socket@example.com' }),
        }),
      ),
    );
    const statuses = replies.map((reply) => reply.status).sort();
    expect(statuses.filter((status) => status === 201)).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(29);
    const list = (await (
      await fetch(`${server.baseUrl}/v1/users?email=same.socket@example.com`, {
        headers: { 'x-api-key': server.adminKey },
      })
    ).json()) as { data: unknown[] };
    expect(list.data).toHaveLength(1);
  });

  it('413 as soon as Content-Length announces a body over the limit, without waiting for (or reading) the body', async () => {
    const { port } = new URL(server.baseUrl);
    const answer = await new Promise<string>((resolveAnswer, reject) => {
      const socket = connect(Number(port), '127.0.0.1');
      let received = '';
      const timer = setTimeout(
        () => reject(new Error(`no answer while the body was being withheld; got ${received}`)),
        5000,
      );
      socket.on('data', (chunk) => {
        received += chunk.toString();
        if (received.includes('\r\n\r\n') && received.includes('}')) {
          clearTimeout(timer);
          socket.destroy();
          resolveAnswer(received);
        }
      });
      socket.on('error', () => undefined);
      // Announce 50 MiB, send 1 KiB, then withhold the rest: only an early 413 can answer this.
      socket.write(
        `POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${server.adminKey}\r\nContent-Type: application/json\r\nContent-Length: 52428800\r\n\r\n`,
      );
      socket.write('{"name":"' + 'x'.repeat(1024));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('content-type: application/problem+json');
    expect(answer).toContain('"type":"/problems/body-too-large"');
  });

  it('413 for a chunked body once it grows past the limit, while the client is still sending', async () => {
    const { port } = new URL(server.baseUrl);
    const answer = await new Promise<string>((resolveAnswer, reject) => {
      const socket = connect(Number(port), '127.0.0.1');
      let received = '';
      let sent = 0;
      const timer = setTimeout(() => reject(new Error(`no 413 after ${sent} bytes; got ${received}`)), 5000);
      socket.on('data', (chunk) => {
        received += chunk.toString();
        if (received.includes('}')) {
          clearTimeout(timer);
          socket.destroy();
          resolveAnswer(received);
        }
      });
      socket.on('error', () => undefined);
      socket.write(
        `POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${server.adminKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const chunk = 'x'.repeat(64 * 1024);
      // Bounded: at most 4 MiB, one 64 KiB chunk per tick, stopping as soon as an answer arrives.
      const pump = () => {
        if (received !== '' || sent >= 4 * 1024 * 1024 || socket.destroyed) return;
        socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
        sent += chunk.length;
        setImmediate(pump);
      };
      pump();
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('"type":"/problems/body-too-large"');
  });

  it('a body still arriving after the 413 meets a lingering close, not a reset: the client reads the answer and its connection ends cleanly', async () => {
    const { port } = new URL(server.baseUrl);
    const storedUsers = async () =>
      (
        (await (
          await fetch(`${server.baseUrl}/v1/users?limit=500`, { headers: { 'x-api-key': server.adminKey } })
        ).json()) as { data: unknown[] }
      ).data;
    const before = await storedUsers();
    const outcome = await new Promise<{ answer: string; error: string | undefined }>((resolveOutcome, reject) => {
      const socket = connect(Number(port), '127.0.0.1');
      let answer = '';
      let error: string | undefined;
      const timer = setTimeout(() => reject(new Error(`the connection did not end within 5 s; got ${answer}`)), 5000);
      socket.on('data', (chunk) => (answer += chunk.toString()));
      socket.on('error', (failure: NodeJS.ErrnoException) => (error = failure.code));
      socket.on('close', () => {
        clearTimeout(timer);
        resolveOutcome({ answer, error });
      });
      socket.write(
        `POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${server.adminKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const chunk = 'x'.repeat(64 * 1024);
      // Bounded: for 800 ms at most, as fast as the connection takes it; the server's FIN ends it sooner.
      const stopAt = Date.now() + 800;
      const pump = () => {
        if (socket.destroyed || !socket.writable) return;
        if (Date.now() > stopAt) return void socket.end();
        if (socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)) setImmediate(pump);
        else socket.once('drain', pump);
      };
      pump();
    });
    expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(outcome.answer).toContain('content-type: application/problem+json');
    expect(outcome.answer).toContain('"type":"/problems/body-too-large"');
    // Ended at once, rowi's writes of the answer met the client's bytes with a reset (EPIPE or ECONNRESET here).
    expect(outcome.error).toBeUndefined();
    expect(await storedUsers()).toEqual(before);
  });
});

describe('rowi serve, graceful shutdown', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'on %s during a stream of writes: every acknowledged write is stored, none is cut off with a 5xx, exit code 0',
    async (signal) => {
      const server = await serve();
      const results: { status: number; email: string }[] = [];
      let signalled = false;
      let counter = 0;
      // Four writers post one user after another (bounded in count) until the server is gone.
      const writer = async () => {
        for (let round = 0; round < 200; round++) {
          const email = `drain${counter++}@example.com`;
          try {
            const reply = await fetch(`${server.baseUrl}/v1/users`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-api-key': server.adminKey },
              body: JSON.stringify({ name: 'Drain', email }),
            });
            results.push({ status: reply.status, email });
            await reply.arrayBuffer();
          } catch {
            results.push({ status: 0, email });
            return;
          }
          if (!signalled && results.filter((result) => result.status === 201).length >= 10) {
            signalled = true;
            server.child.kill(signal);
          }
        }
      };
      await Promise.all([writer(), writer(), writer(), writer()]);
      const code = await server.exited;

      expect(signalled).toBe(true);
      expect(code).toBe(0);
      expect(server.stdout()).toContain('shutting down');
      expect(server.stdout()).toContain('"msg":"stopped"');
      // A request was either answered in full, refused at the door (503 / connection closed), never half-done.
      expect(results.filter((result) => ![201, 503, 0].includes(result.status))).toEqual([]);
      const acknowledged = results.filter((result) => result.status === 201).map((result) => result.email);
      const database = await openSqliteFile(server.dataFile);
      const stored = database.all<{ email: string }>('select email from users').map((row) => row.email);
      database.close();
      expect(acknowledged.length).toBeGreaterThanOrEqual(10);
      expect(stored).toEqual(expect.arrayContaining(acknowledged));
    },
  );
});

describe('rowi serve, draining a kept-alive connection', () => {
  it('on SIGTERM: a request in flight completes (201) with Connection: close, and the server then ends the connection cleanly (no reset); exit code 0', async () => {
    const server = await serve();
    const { port } = new URL(server.baseUrl);
    const socket = connect(Number(port), '127.0.0.1');
    let received = '';
    let ended = false;
    let failure: string | undefined;
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('end', () => (ended = true));
    socket.on('error', (error: NodeJS.ErrnoException) => (failure = error.code));
    const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));
    const body = JSON.stringify({ name: 'In Flight', email: 'in.flight@example.com' });

    // The request is in flight (headers and half its body sent) when the signal arrives.
    socket.write(
      `POST /v1/users HTTP/1.1\r\nHost: rowi\r\nX-API-Key: ${server.adminKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    await pause(200);
    server.child.kill('SIGTERM');
    await pause(300);
    socket.write(body.slice(10));
    const code = await server.exited;
    for (let waited = 0; !ended && waited < 2000; waited += 20) await pause(20);
    socket.destroy();

    expect(received).toMatch(/^HTTP\/1\.1 201 /);
    expect(received).toMatch(/\r\nConnection: close\r\n/i);
    expect(received.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(ended).toBe(true);
    expect(failure).toBeUndefined();
    expect(code).toBe(0);
    const database = await openSqliteFile(server.dataFile);
    expect(database.get('select count(*) as n from users where email = ?', 'in.flight@example.com')).toEqual({ n: 1 });
    database.close();
  });
});

describe('rowi serve, requests on open connections while draining', () => {
  it('on SIGTERM: on connections kept alive from before, GET /health/ready answers 503 (so balancers move away) and GET /v1/users is served (200), each with Connection: close', async () => {
    const server = await serve();
    const { port } = new URL(server.baseUrl);
    const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));
    const open = () => {
      const socket = connect(Number(port), '127.0.0.1');
      const state = { received: '', socket };
      socket.on('data', (chunk) => (state.received += chunk.toString()));
      socket.on('error', () => undefined);
      return state;
    };
    const probe = open();
    const api = open();
    probe.socket.write('GET /health/live HTTP/1.1\r\nHost: rowi\r\n\r\n');
    api.socket.write(`GET /v1/users?limit=1 HTTP/1.1\r\nHost: rowi\r\nX-API-Key: ${server.adminKey}\r\n\r\n`);
    for (
      let waited = 0;
      !(probe.received.includes('\r\n\r\n{') && api.received.includes('\r\n\r\n{')) && waited < 5000;
      waited += 20
    )
      await pause(20);
    const before = { probe: probe.received.length, api: api.received.length };

    server.child.kill('SIGTERM');
    for (let waited = 0; !server.stdout().includes('shutting down') && waited < 5000; waited += 10) await pause(10);
    // Within the quiet time a kept-alive connection is given before it is closed.
    probe.socket.write('GET /health/ready HTTP/1.1\r\nHost: rowi\r\n\r\n');
    api.socket.write(`GET /v1/users?limit=1 HTTP/1.1\r\nHost: rowi\r\nX-API-Key: ${server.adminKey}\r\n\r\n`);
    expect(await server.exited).toBe(0);

    const probeReply = probe.received.slice(before.probe);
    const apiReply = api.received.slice(before.api);
    expect(probeReply).toMatch(/^HTTP\/1\.1 503 /);
    expect(probeReply).toMatch(/\r\nConnection: close\r\n/i);
    expect(probeReply).toContain('"type":"/problems/service-unavailable"');
    expect(apiReply).toMatch(/^HTTP\/1\.1 200 /);
    expect(apiReply).toMatch(/\r\nConnection: close\r\n/i);
    probe.socket.destroy();
    api.socket.destroy();
  });
});

describe('rowi serve, the first admin caller', () => {
  it('rowi serve: on an empty database, creates the admin caller and prints its key once on stderr, never in the log (stdout); a restart prints no key', async () => {
    const first = await serve();
    const key = first.adminKey;
    const secret = key.slice('rowi_12345678_'.length);
    expect(key).toMatch(/^rowi_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$/);
    expect(first.stderr().split(key)).toHaveLength(2);
    expect(first.stderr().match(/ROWI_KEY=/g)).toHaveLength(1);
    const withKey = await fetch(`${first.baseUrl}/v1/users`, { headers: { 'x-api-key': key } });
    expect(withKey.status).toBe(200);
    expect(await withKey.json()).toMatchObject({ data: [] });
    const withoutKey = await fetch(`${first.baseUrl}/v1/users`);
    expect(withoutKey.status).toBe(401);
    await withoutKey.arrayBuffer();
    expect(await first.stop()).toBe(0);
    // The log is complete once the process has exited: not the key, nor its secret part, anywhere in it.
    expect(first.stdout()).toContain('"msg":"stopped"');
    expect(first.stdout()).not.toContain(secret);
    expect(first.stdout()).not.toContain('ROWI_KEY=');

    const database = await openSqliteFile(first.dataFile);
    const callers = database.all<{ id: number; name: string; role: string }>('select id, name, role from callers');
    const keys = database.all('select * from api_keys');
    database.close();
    expect(callers).toEqual([{ id: expect.any(Number), name: 'admin', role: 'admin' }]);
    expect(keys).toEqual([
      expect.objectContaining({
        caller_id: callers[0]!.id,
        prefix: key.slice(0, 'rowi_12345678'.length),
        revoked_at: null,
      }),
    ]);
    expect(JSON.stringify(keys)).not.toContain(secret);

    const second = await serve({ dataFile: first.dataFile, adminKey: key });
    expect(second.stderr()).toContain(`rowi is serving ${second.baseUrl}/v1`);
    expect(second.stderr()).not.toContain('ROWI_KEY=');
    expect(second.stderr()).not.toMatch(/rowi_[a-z0-9]{8}_/);
    const again = await fetch(`${second.baseUrl}/v1/users`, { headers: { 'x-api-key': key } });
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(await second.stop()).toBe(0);
    expect(second.stdout()).not.toContain(secret);
    const reopened = await openSqliteFile(first.dataFile);
    expect(reopened.get('select count(*) as n from callers')).toEqual({ n: 1 });
    expect(reopened.get('select count(*) as n from api_keys')).toEqual({ n: 1 });
    reopened.close();
  });
});

describe('rowi command line', () => {
  it.each([
    [['serve'], { ROWI_PORT: 'abc' }, 'ROWI_PORT'],
    [['serve', '--port', '70000'], {}, '--port'],
    [['serve'], { ROWI_LOG_LEVEL: 'loud' }, 'ROWI_LOG_LEVEL'],
    [['serve'], { ROWI_HOST: 'not a host' }, 'ROWI_HOST'],
    [['serve'], { ROWI_BODY_LIMIT: '12' }, 'ROWI_BODY_LIMIT'],
    [['serve', '--nope'], {}, '--nope'],
    [['frobnicate'], {}, 'frobnicate'],
  ])('rowi %j with %j: exit code 2 and a message naming %s, before listening', async (args, env, named) => {
    const result = await runCli(args, { ROWI_DATA: tempDataFile(), ...env });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(named);
    expect(result.stdout).not.toContain('listening');
  });

  it.each([
    { command: 'serve', args: ['serve'] },
    { command: 'migrate', args: ['migrate'] },
    { command: 'callers create', args: ['callers', 'create', '--name', 'ops', '--role', 'reader'] },
    { command: 'signing-keys rotate', args: ['signing-keys', 'rotate'] },
    { command: 'openapi', args: ['openapi'] },
  ])(
    'rowi $command: exit code 2 naming ROWI_PROT and ROWI_PORT, before doing anything, when ROWI_PROT=18183 is set',
    async ({ args }) => {
      const dataFile = tempDataFile();
      const result = await runCli(args, { ROWI_DATA: dataFile, ROWI_PROT: '18183' });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('rowi: ROWI_PROT (did you mean ROWI_PORT?): not a setting of rowi');
      expect(result.stdout).toBe('');
      expect(existsSync(dataFile)).toBe(false);
    },
  );

  it('rowi serve: exit code 2 naming ROWI_DATABASE_URL, with no SQLite file, no admin key and no password echoed, when ROWI_DATABSE_URL is set', async () => {
    const dataFile = tempDataFile();
    const result = await runCli(['serve', '--port', '0'], {
      ROWI_DATA: dataFile,
      ROWI_DATABSE_URL: 'postgres://rowi:s3cret@127.0.0.1:9/rowi',
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('ROWI_DATABSE_URL (did you mean ROWI_DATABASE_URL?)');
    expect(result.stderr).not.toMatch(/s3cret|ROWI_KEY=/);
    expect(existsSync(dataFile)).toBe(false);
  });

  it('rowi serve: starts, saying on stderr which variable it ignores, when ROWI_UNKNOWN_SETTINGS=warn lets ROWI_PROT through', async () => {
    const server = await serve({ env: { ROWI_PROT: '18183', ROWI_UNKNOWN_SETTINGS: 'warn' } });
    expect(server.stderr()).toContain(
      'rowi: warning: ROWI_PROT (did you mean ROWI_PORT?): not a setting of rowi, ignored (ROWI_UNKNOWN_SETTINGS=warn)',
    );
    expect((await fetch(`${server.baseUrl}/health/live`)).status).toBe(200);
  });

  it.each([
    { given: 'serve --prot 18183', message: 'rowi: unknown flag --prot (did you mean --port?)' },
    { given: 'migrate --dta ./x.db', message: 'rowi: unknown flag --dta (did you mean --data?)' },
    { given: 'serve --port 0 --port 18183', message: 'rowi: --port is given more than once: give it once' },
  ])('rowi: exit code 2 with "$message" when given $given', async ({ given, message }) => {
    const args = given.split(' ');
    const dataFile = tempDataFile();
    const result = await runCli(args, { ROWI_DATA: dataFile });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
    expect(existsSync(dataFile)).toBe(false);
  });

  it('rowi serve: exit code 2 naming ROWI_DATABASE_URL, instead of starting on SQLite, when it is set but empty', async () => {
    const dataFile = tempDataFile();
    const result = await runCli(['serve', '--port', '0'], { ROWI_DATA: dataFile, ROWI_DATABASE_URL: '' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('rowi: ROWI_DATABASE_URL is empty: give it a value');
    expect(existsSync(dataFile)).toBe(false);
  });

  it('rowi serve: exit code 2 when ROWI_DATA cannot be opened as a database', async () => {
    const folder = tempFolder('bad-data');
    const notADatabase = join(folder, 'file');
    writeFileSync(notADatabase, 'plain text, not SQLite '.repeat(100));
    try {
      const result = await runCli(['serve', '--port', '0'], { ROWI_DATA: notADatabase });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('ROWI_DATA');
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('rowi migrate: applies the migrations once, then reports the database up to date', async () => {
    const dataFile = tempDataFile();
    const first = await runCli(['migrate', '--data', dataFile]);
    const migrations = migrationNames();
    expect(migrations.slice(0, 2)).toEqual(['0001-users', '0002-inventory-orders']);
    expect(first).toMatchObject({ code: 0, stdout: `applied ${migrations.join(', ')}\n` });
    const second = await runCli(['migrate', '--data', dataFile]);
    expect(second).toMatchObject({ code: 0, stdout: 'database is up to date\n' });
  });

  it('rowi --version and rowi --help: exit code 0', async () => {
    const version = await runCli(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const name of ['ROWI_HOST', 'ROWI_PORT', 'ROWI_DATA', 'ROWI_LOG_LEVEL', '--port'])
      expect(help.stdout).toContain(name);
  });
});
