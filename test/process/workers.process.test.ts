import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { itOnce } from '../helpers/database.js';
import { runCli, startServer, type RunningServer, type StartOptions } from '../helpers/process.js';

/**
 * `rowi serve --workers N` over a real socket, on the run's backend: N processes share the port,
 * a worker that dies is replaced, SIGTERM drains them all, and a start that fails in the workers
 * fails as a whole. (Correctness across workers, the orders and revocation, is in test/resources/orders.process.test.ts.)
 */

const started: RunningServer[] = [];
async function serve(options: StartOptions = {}): Promise<RunningServer> {
  const server = await startServer(options);
  started.push(server);
  return server;
}
afterEach(() => {
  for (const server of started.splice(0)) {
    const workers = childrenOf(server.child.pid!);
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    for (const pid of workers) killQuietly(pid);
  }
});

/** Process ids of the primary's worker processes. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['--ppid', String(pid), '-o', 'pid='], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((child) => child > 0);
  } catch {
    return []; // ps exits 1 when there are none
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

async function getUsers(server: RunningServer): Promise<number> {
  const reply = await fetch(`${server.baseUrl}/v1/users`, {
    headers: { 'x-api-key': server.adminKey },
    signal: AbortSignal.timeout(10_000),
  });
  await reply.arrayBuffer();
  return reply.status;
}

describe('rowi serve --workers 2', () => {
  it('runs two worker processes on one port, both of which answer requests; one "listening" line and one banner', async () => {
    const server = await serve({ args: ['--workers', '2'] });
    expect(childrenOf(server.child.pid!)).toHaveLength(2);
    const statuses = [];
    for (let index = 0; index < 40; index++) statuses.push(await getUsers(server));
    expect(new Set(statuses)).toEqual(new Set([200]));
    // The access log names the worker that answered: both did.
    await pause(200);
    const workers = new Set(
      [...server.stdout().matchAll(/"worker":(\d+),[^\n]*"msg":"request completed"/g)].map((match) => match[1]),
    );
    expect(workers).toEqual(new Set(['1', '2']));
    expect(server.stdout().match(/"msg":"listening on /g)).toHaveLength(1);
    expect(server.stderr().match(/rowi is serving .*2 worker processes/g)).toHaveLength(1);
  });

  it('a caller reads what it has just written whichever worker answers: no worker serves a copy it read before (read cache)', async () => {
    const server = await serve({ args: ['--workers', '2'] });
    // A connection of its own for every request, so that the primary deals them to both workers.
    const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const reply = await fetch(`${server.baseUrl}${path}`, {
        method,
        headers: {
          'x-api-key': server.adminKey,
          connection: 'close',
          ...(body === undefined ? {} : { 'content-type': 'application/merge-patch+json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: reply.status, etag: reply.headers.get('etag'), json: (await reply.json()) as { name: string } };
    };
    const created = await fetch(`${server.baseUrl}/v1/users`, {
      method: 'POST',
      headers: { 'x-api-key': server.adminKey, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Round 0', email: 'workers-cache@example.com' }),
    });
    const { id } = (await created.json()) as { id: number };
    for (let round = 1; round <= 30; round++) {
      // Both workers read it (and may keep it)…
      for (let read = 0; read < 4; read++)
        expect((await send('GET', `/v1/users/${id}`)).json.name).toBe(`Round ${round - 1}`);
      const current = await send('GET', `/v1/users/${id}`);
      // …then one changes it, and every read that follows, on either, is the new one.
      const patched = await send('PATCH', `/v1/users/${id}`, { name: `Round ${round}` }, { 'if-match': current.etag! });
      expect(patched.status).toBe(200);
      for (let read = 0; read < 4; read++) {
        const after = await send('GET', `/v1/users/${id}`);
        expect(after.json.name).toBe(`Round ${round}`);
        expect(after.etag).toBe(patched.etag);
      }
    }
    // Both workers answered (the access log names them).
    await pause(200);
    const workers = new Set(
      [...server.stdout().matchAll(/"worker":(\d+),[^\n]*"msg":"request completed"/g)].map((match) => match[1]),
    );
    expect(workers).toEqual(new Set(['1', '2']));
  });

  it(
    'a worker killed with SIGKILL is replaced, and the port keeps answering meanwhile',
    { timeout: 60_000 },
    async () => {
      const server = await serve({ env: { ROWI_WORKERS: '2' } });
      // A worker that dies within 2 s of its start is not restarted (it would crash again).
      await pause(2200);
      const [victim, survivor] = childrenOf(server.child.pid!);
      process.kill(victim!, 'SIGKILL');
      // Once the primary has seen the worker go (at once), it deals connections to the survivor only.
      for (
        let attempt = 0;
        attempt < 100 && !/"msg":"a worker process ended unexpectedly"/.test(server.stdout());
        attempt++
      )
        await pause(20);
      for (let index = 0; index < 10; index++) expect(await getUsers(server)).toBe(200);
      let workers: number[] = [];
      for (let attempt = 0; attempt < 100 && workers.length < 2; attempt++) {
        await pause(100);
        workers = childrenOf(server.child.pid!);
      }
      expect(workers).toHaveLength(2);
      expect(workers).toContain(survivor);
      expect(workers).not.toContain(victim);
      for (let index = 0; index < 20; index++) expect(await getUsers(server)).toBe(200);
    },
  );

  it('SIGTERM to the primary: every worker closes gracefully and exits, then the primary, with exit code 0, and nothing is logged as an error', async () => {
    const server = await serve({ env: { ROWI_WORKERS: '2' } });
    const workers = childrenOf(server.child.pid!);
    expect(workers).toHaveLength(2);
    expect(await getUsers(server)).toBe(200);
    expect(await server.stop('SIGTERM')).toBe(0);
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
    expect(server.stdout()).toMatch(/"msg":"stopped"/);
    // Pino's levels 50 (error) and 60 (fatal): a graceful stop has nothing to report as one.
    expect(
      server
        .stdout()
        .split('\n')
        .filter((line) => /"level":(50|60),/.test(line)),
    ).toEqual([]);
  });

  // Refusals of settings, before any database is opened.
  itOnce(
    'a start that fails in the workers (a TLS certificate that does not exist) exits 2 naming the setting, and leaves no process behind',
    async () => {
      const result = await runCli([
        'serve',
        '--port',
        '0',
        '--workers',
        '2',
        '--tls-cert',
        '/nonexistent/cert.pem',
        '--tls-key',
        '/nonexistent/key.pem',
      ]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('ROWI_TLS_CERT');
    },
  );

  itOnce(
    "a bad setting beside --workers 2 (checked by the primary's preparer): exit code 2, the setting named once",
    async () => {
      const result = await runCli(['serve', '--workers', '2', '--port', 'abc']);
      expect(result.code).toBe(2);
      expect(result.stderr.match(/--port="abc" is not a valid setting/g)).toHaveLength(1);
    },
  );

  itOnce('ROWI_WORKERS=many and --workers -1: exit code 2 naming the setting', async () => {
    const bad = await runCli(['serve'], { ROWI_WORKERS: 'many' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('ROWI_WORKERS');
    const negative = await runCli(['serve', '--workers', '-1']);
    expect(negative.code).toBe(2);
    expect(negative.stderr).toContain('--workers');
  });
});
