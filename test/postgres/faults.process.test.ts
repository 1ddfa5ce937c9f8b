import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { adminQuery, createTestDatabase, PG_URL, type TestDatabase } from '../helpers/database.js';
import { migrationNames } from '../helpers/migrations.js';
import { runCli, startServer, type RunningServer, type StartOptions } from '../helpers/process.js';
import { startTcpProxy, viaProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * PostgreSQL failing under a running `rowi serve` (the built CLI, over real loopback sockets),
 * seen from the caller's side: a 503 problem with Retry-After, never a 500 or a hang, and no
 * acknowledged write lost. "PostgreSQL stopped" is a TCP proxy between rowi and the server that
 * cuts every connection and refuses new ones; the real server, shared by the other test files,
 * is never touched.
 */

/** ROWI_DATABASE_TIMEOUT of the servers here: how long a request may wait for a connection or a statement. */
const DB_TIMEOUT_MS = 1000;
/** What a request may take beyond that (the HTTP round trip, a connection attempt, a busy event loop). */
const SLACK_MS = 2500;

const servers: RunningServer[] = [];
const databases: TestDatabase[] = [];
const proxies: TcpProxy[] = [];
const clients: pg.Client[] = [];

async function serve(options: StartOptions): Promise<RunningServer> {
  const server = await startServer(options);
  servers.push(server);
  return server;
}

async function database(): Promise<TestDatabase & { url: string; schema: string }> {
  const created = await createTestDatabase('postgres');
  databases.push(created);
  return { ...created, url: created.env.ROWI_DATABASE_URL!, schema: created.schema! };
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    await server.exited;
  }
  for (const client of clients.splice(0)) await client.end().catch(() => {});
  for (const proxy of proxies.splice(0)) await proxy.close();
  for (const created of databases.splice(0)) await created.drop();
});

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Answer {
  /** performance.now() when the request was sent, and how long the answer took. */
  sentAt: number;
  ms: number;
  status: number;
  headers: Headers;
  body: unknown;
  mediaType: string;
}

/** Any failure to get an answer in time (a hang, a reset) is an error of the test, not an Answer. */
class NoAnswer extends Error {}

async function send(url: string, init: RequestInit = {}, limitMs = DB_TIMEOUT_MS + SLACK_MS): Promise<Answer> {
  const sentAt = performance.now();
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, { ...init, signal: AbortSignal.timeout(limitMs) });
    text = await response.text();
  } catch (error) {
    throw new NoAnswer(
      `${init.method ?? 'GET'} ${url}: no answer within ${limitMs} ms, after ${Math.round(performance.now() - sentAt)} ms (${(error as Error).message}: ${String((error as Error).cause)})`,
    );
  }
  const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
  let body: unknown = text;
  if (mediaType.endsWith('json') && text !== '') body = JSON.parse(text);
  return {
    sentAt,
    ms: performance.now() - sentAt,
    status: response.status,
    headers: response.headers,
    body,
    mediaType,
  };
}

/** Why an answer is not the 503 problem a caller should get when the database cannot take a request ('' if it is). */
function notUnavailable(answer: Answer): string {
  const problem = answer.body as Record<string, unknown> | undefined;
  const failures: string[] = [];
  if (answer.status !== 503) failures.push(`status ${answer.status}`);
  if (answer.mediaType !== 'application/problem+json') failures.push(`media type ${answer.mediaType}`);
  if (problem?.type !== '/problems/service-unavailable') failures.push(`type ${String(problem?.type)}`);
  if (problem?.status !== 503) failures.push(`problem status ${String(problem?.status)}`);
  if (!/^\d+$/.test(answer.headers.get('retry-after') ?? ''))
    failures.push(`Retry-After ${answer.headers.get('retry-after')}`);
  return failures.length === 0 ? '' : `${failures.join(', ')}: ${JSON.stringify(answer.body)}`;
}

function expectUnavailable(answer: Answer): void {
  expect(notUnavailable(answer)).toBe('');
}

/** How many times each distinct string occurs: a short failure message for hundreds of answers. */
function tally(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** Waits until `check` is true, polling; throws after `limitMs`. */
async function until(what: string, check: () => boolean | Promise<boolean>, limitMs: number): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${limitMs} ms`);
    await sleep(20);
  }
}

describe('rowi serve on PostgreSQL: faults', () => {
  it('PostgreSQL stopped while writes are in flight: 201 or a 503 problem with Retry-After (never 500, never a hang), ready 503 / live 200, then it resumes by itself and no acknowledged write is lost; each lost connection is one short log line naming the fault', async () => {
    const db = await database();
    const target = new URL(PG_URL!);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    proxies.push(proxy);
    const server = await serve({
      database: { ROWI_DATABASE_URL: viaProxy(db.url, proxy) },
      env: { ROWI_DATABASE_TIMEOUT: String(DB_TIMEOUT_MS), ROWI_DATABASE_POOL_SIZE: '4' },
    });
    const headers = { 'x-api-key': server.adminKey, 'content-type': 'application/json' };

    // Bounded load: at most MAX_REQUESTS writes, for at most MAX_MS, by WRITERS callers at once.
    const WRITERS = 4;
    const MAX_REQUESTS = 1500;
    const MAX_MS = 15_000;
    const started = performance.now();
    const answers: (Answer & { email: string })[] = [];
    const failures: string[] = [];
    let sent = 0;
    let done = false;
    const run = randomBytes(4).toString('hex');
    const writer = async (w: number) => {
      while (!done && sent < MAX_REQUESTS && performance.now() - started < MAX_MS) {
        const n = ++sent;
        const email = `w${w}.${n}.${run}@example.com`;
        try {
          const answer = await send(`${server.baseUrl}/v1/users`, {
            method: 'POST',
            headers: { ...headers, 'idempotency-key': `fault-${run}-${n}` },
            body: JSON.stringify({ name: `Writer ${w} #${n}`, email }),
          });
          answers.push({ ...answer, email });
          // A caller honouring Retry-After would wait 2 s; these come back sooner to keep the pressure on.
          await sleep(answer.status === 201 ? 2 : 25);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
    };
    const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
    const created = () => answers.filter((answer) => answer.status === 201);

    try {
      await until('30 users created before the outage', () => created().length >= 30 || failures.length > 0, 5000);
      expect(failures).toEqual([]);

      await proxy.stop();
      const stoppedAt = performance.now();
      await sleep(300);
      const ready = await send(`${server.baseUrl}/health/ready`);
      expectUnavailable(ready);
      expect((ready.body as { checks: { database: { status: string } } }).checks.database.status).toBe('fail');
      const live = await send(`${server.baseUrl}/health/live`);
      expect(live.status).toBe(200);
      await sleep(Math.max(0, 2000 - (performance.now() - stoppedAt)));

      await proxy.start();
      const restartedAt = performance.now();
      await until(
        'a user created after PostgreSQL is back',
        () => answers.some((answer) => answer.status === 201 && answer.sentAt > restartedAt),
        8000,
      );
      expect((await send(`${server.baseUrl}/health/ready`)).status).toBe(200);
      done = true;
      await Promise.all(writers);

      // What the callers saw.
      expect(failures).toEqual([]);
      const during = answers.filter((answer) => answer.sentAt > stoppedAt && answer.sentAt + answer.ms < restartedAt);
      expect(during.length).toBeGreaterThan(10);
      expect(during.filter((answer) => answer.status !== 503)).toEqual([]);
      const unexpected = answers
        .filter((answer) => answer.status !== 201 && notUnavailable(answer) !== '')
        .map((answer) => notUnavailable(answer));
      expect(unexpected).toEqual([]);
      expect(Math.max(...answers.map((answer) => answer.ms))).toBeLessThan(DB_TIMEOUT_MS + SLACK_MS);

      // What is stored: every write acknowledged with 201 is there (a 503 may or may not have taken effect).
      const acknowledged = created().map((answer) => ({ id: (answer.body as { id: number }).id, email: answer.email }));
      expect(acknowledged.length).toBeGreaterThan(30);
      const { rows } = await adminQuery(`select id, email from ${db.schema}.users`);
      const stored = new Map(rows.map((row: { id: string; email: string }) => [Number(row.id), row.email]));
      expect(acknowledged.filter(({ id, email }) => stored.get(id) !== email)).toEqual([]);
      const last = acknowledged.at(-1)!;
      const read = await send(`${server.baseUrl}/v1/users/${last.id}`, { headers: { 'x-api-key': server.adminKey } });
      expect(read.status).toBe(200);
      expect((read.body as { email: string }).email).toBe(last.email);

      expect(server.child.exitCode).toBeNull();
      expect(server.child.signalCode).toBeNull();

      // Each lost connection is one short line naming the fault, never the driver's internals
      // (pg hangs the whole client on the error: its prepared SQL and cancel key, ~20 KB a line).
      const lines = server.stdout().split('\n').filter(Boolean);
      expect(lines.filter((line) => line.length > 2000)).toEqual([]);
      const lost = lines.filter((line) => line.includes('"msg":"database connection lost: '));
      expect(lost.length).toBeGreaterThan(0);
      expect(lines.filter((line) => /secretKey|processID|preparedStatements/.test(line))).toEqual([]);
    } finally {
      done = true;
      await Promise.all(writers);
    }
  });

  describe('a database that cannot be used at start: exit code 2, a message naming ROWI_DATABASE_URL, nothing listens', () => {
    const serveWith = (url: string) =>
      runCli(['serve'], {
        ROWI_DATABASE_URL: url,
        ROWI_HOST: '127.0.0.1',
        ROWI_PORT: '0',
        ROWI_WORKERS: '1',
        ROWI_LOG_LEVEL: 'info',
      });
    const server = new URL(PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');

    it.each([
      {
        what: 'an unknown database',
        change: (url: URL) => void (url.pathname = '/no_such_db_xyz'),
        reason: /database "no_such_db_xyz" does not exist/,
      },
      {
        what: 'an unknown user',
        change: (url: URL) => void (url.username = 'no_such_user'),
        reason: /role "no_such_user" does not exist/,
      },
    ])('$what', async ({ change, reason }) => {
      const url = new URL(server);
      change(url);
      const result = await serveWith(url.toString());
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('ROWI_DATABASE_URL');
      expect(result.stderr).toMatch(reason);
      expect(result.stdout).not.toContain('listening');
    });

    // The test PostgreSQL trusts loopback connections (no password checked), so a wrong password
    // is not rejected here; the password is tested against a port where nothing listens instead.
    it('a password in the URL is never echoed (an unreachable server)', async () => {
      const result = await serveWith('postgres://postgres:s3cret-pw@127.0.0.1:1/test');
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('ROWI_DATABASE_URL');
      expect(result.stderr).toContain('ECONNREFUSED');
      expect(result.stderr + result.stdout).not.toContain('s3cret-pw');
      expect(result.stdout).not.toContain('listening');
    });

    it('a URL that is not postgres:// (not echoed either)', async () => {
      const result = await serveWith('mysql://x');
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('ROWI_DATABASE_URL');
      expect(result.stderr + result.stdout).not.toContain('mysql://x');
      expect(result.stdout).not.toContain('listening');
    });
  });

  /**
   * ROWI_DATABASE_TIMEOUT here. Once the lock is gone, 500 reads queue for 2 connections, and each
   * must get one within this time: generous, since the test machine may be busy.
   */
  const POOL_WAIT_MS = 3000;

  it('pool exhausted (2 connections, a table locked): 500 concurrent reads all get a 503 problem with Retry-After in time; once unlocked, 500 concurrent reads all get 200', async () => {
    const db = await database();
    const server = await serve({
      database: { ROWI_DATABASE_URL: db.url },
      env: { ROWI_DATABASE_POOL_SIZE: '2', ROWI_DATABASE_TIMEOUT: String(POOL_WAIT_MS) },
    });
    const key = { 'x-api-key': server.adminKey };
    const created = await send(`${server.baseUrl}/v1/users`, {
      method: 'POST',
      headers: { ...key, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Locked Out', email: `locked.${randomBytes(4).toString('hex')}@example.com` }),
    });
    expect(created.status).toBe(201);
    const url = `${server.baseUrl}/v1/users/${(created.body as { id: number }).id}`;
    const burst = async () => {
      const begun = performance.now();
      const answers = await Promise.all(Array.from({ length: 500 }, () => send(url, { headers: key }, 15_000)));
      return { answers, ms: performance.now() - begun };
    };

    const locker = new pg.Client({ connectionString: PG_URL });
    clients.push(locker);
    await locker.connect();
    await locker.query('begin');
    await locker.query(`lock table ${db.schema}.users in access exclusive mode`);
    const locked = await burst();
    await locker.query('rollback');

    expect(tally(locked.answers.map(notUnavailable).filter((failure) => failure !== ''))).toEqual({});
    expect(locked.ms).toBeLessThan(15_000);
    expect(server.child.exitCode).toBeNull();

    const unlocked = await burst();
    expect(
      tally(
        unlocked.answers
          .filter((answer) => answer.status !== 200)
          .map((answer) => `${answer.status} ${(answer.body as { type?: string }).type}`),
      ),
    ).toEqual({});
    expect(server.child.exitCode).toBeNull();
  });

  it('two instances started at once on an empty schema: both become ready, each migration is applied once, one first admin', async () => {
    const db = await database();
    // Only one of the two finds the database empty and prints the first admin key; startServer
    // insists on a key, so both are given a placeholder and the printed one is taken after.
    const starts = await Promise.allSettled(
      [0, 1].map(() => serve({ database: { ROWI_DATABASE_URL: db.url }, adminKey: 'placeholder', timeoutMs: 10_000 })),
    );
    const failed = starts.find((start) => start.status === 'rejected');
    if (failed) throw failed.reason;
    const both = starts.map((start) => (start as PromiseFulfilledResult<RunningServer>).value);
    const printed = both
      .map((server) => /^ {2}ROWI_KEY=(rowi_\S+)$/m.exec(server.stderr())?.[1])
      .filter((key) => key !== undefined);
    expect(printed).toHaveLength(1);

    const { rows: migrations } = await adminQuery(
      `select name, count(*)::int as n from ${db.schema}.kysely_migration group by name order by name`,
    );
    expect(migrations).toEqual(migrationNames().map((name) => ({ name, n: 1 })));
    const { rows: admins } = await adminQuery(`select count(*)::int as n from ${db.schema}.callers`);
    expect(admins).toEqual([{ n: 1 }]);

    for (const server of both) {
      const ready = await send(`${server.baseUrl}/health/ready`);
      expect(ready.status, JSON.stringify(ready.body)).toBe(200);
      expect((await send(`${server.baseUrl}/v1/users`, { headers: { 'x-api-key': printed[0]! } })).status).toBe(200);
    }
  });
});
