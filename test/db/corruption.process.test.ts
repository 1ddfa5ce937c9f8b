import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { damageSqliteFile } from '../helpers/damage.js';
import { runCli, serverPool, startServer, tempDataFile } from '../helpers/process.js';
import { buildItem, buildUser } from '../helpers/records.js';

/**
 * The built CLI on a real SQLite file with damaged pages: the start's check (exit code 2, with what
 * is damaged and what to do), and with the check off, what a running rowi does when a request
 * meets the damage, across the workers of `rowi serve --workers 2`. SQLite only.
 */
const { serve, killAll } = serverPool();
afterEach(killAll);

/** A rowi file with users, an item and its admin key, made by a real server and left closed. */
let pristine: { file: string; adminKey: string };
beforeAll(async () => {
  const file = tempDataFile();
  const server = await startServer({ dataFile: file });
  for (let index = 0; index < 40; index++)
    await send(server.baseUrl, 'POST', '/v1/users', server.adminKey, buildUser());
  await send(server.baseUrl, 'POST', '/v1/items', server.adminKey, buildItem());
  expect(await server.stop()).toBe(0);
  pristine = { file, adminKey: server.adminKey };
});

function pristineCopy(): string {
  const file = tempDataFile();
  mkdirSync(dirname(file), { recursive: true });
  copyFileSync(pristine.file, file);
  return file;
}

/** A copy of the pristine file, damaged. */
async function damagedCopy(where: Parameters<typeof damageSqliteFile>[1]): Promise<string> {
  const file = pristineCopy();
  await damageSqliteFile(file, where);
  return file;
}

/** One request on a connection of its own (so that `--workers` deals each to the next worker). */
function send(
  baseUrl: string,
  method: string,
  path: string,
  key: string | undefined,
  body?: unknown,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = {
      ...(key ? { 'x-api-key': key } : {}),
      ...(payload ? { 'content-type': 'application/json' } : {}),
    };
    const call = request(`${baseUrl}${path}`, { method, headers, agent: false, timeout: 10_000 }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () =>
        resolve({ status: response.statusCode!, json: text === '' ? undefined : JSON.parse(text) }),
      );
    });
    call.on('error', reject);
    call.end(payload);
  });
}

describe('rowi on a damaged SQLite file: the start', () => {
  it.each([
    {
      where: 'header' as const,
      named: 'file is not a database: it is not a SQLite database, or its first page is damaged',
    },
    { where: { tree: 'users' }, named: 'users: Tree' },
    { where: { tree: 'users_email_key_unique' }, named: 'users_email_key_unique: Tree' },
  ])(
    'rowi serve: exit code 2 with what is damaged ($named) and what to do, writing nothing, when $where is damaged',
    async ({ where, named }) => {
      const file = await damagedCopy(where);
      const before = readFileSync(file);
      const result = await runCli(['serve', '--port', '0'], { ROWI_DATA: file, ROWI_LOG_LEVEL: 'info' });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`rowi: ROWI_DATA=${JSON.stringify(file)}`);
      expect(result.stderr).toContain(named);
      expect(result.stderr).toContain(`sqlite3 ${file} .recover | sqlite3 `);
      expect(result.stderr).toContain('restore the latest backup');
      expect(result.stdout).not.toContain('listening');
      expect(readFileSync(file).equals(before)).toBe(true);
    },
  );

  it('rowi migrate and rowi callers create: exit code 2 with the damage named, before writing, when the users table is damaged', async () => {
    const file = await damagedCopy({ tree: 'users' });
    for (const args of [['migrate'], ['callers', 'create', '--name', 'ops', '--role', 'reader']]) {
      const result = await runCli(args, { ROWI_DATA: file });
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain("is damaged: SQLite's quick_check found damage");
      expect(result.stdout).toBe('');
    }
  });

  it('rowi serve: exit code 2 naming integrity_check when ROWI_SQLITE_CHECK=full and an index is damaged', async () => {
    const file = await damagedCopy({ tree: 'users_name_id' });
    const result = await runCli(['serve', '--port', '0'], { ROWI_DATA: file, ROWI_SQLITE_CHECK: 'full' });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain("SQLite's integrity_check found damage");
    expect(result.stderr).toContain('users_name_id: Tree');
  });

  it('rowi serve: starts, logging that the check found nothing and how long it took, when the file is sound', async () => {
    const server = await serve({ dataFile: pristineCopy(), adminKey: pristine.adminKey });
    expect(server.stdout()).toMatch(
      /"check":"quick_check","ms":\d+,"msg":"[^"]+ has no damage SQLite's quick_check finds"/,
    );
  });
});

describe('rowi on a damaged SQLite file: serving it with ROWI_SQLITE_CHECK=off', () => {
  it('GET /v1/users: 503 storage-corrupt on one worker, and then on both workers /health/ready fails and every write is refused, with nothing written and one log line each', async () => {
    const file = await damagedCopy({ tree: 'users' });
    const server = await serve({
      dataFile: file,
      adminKey: pristine.adminKey,
      args: ['--workers', '2'],
      env: { ROWI_SQLITE_CHECK: 'off' },
    });
    const key = pristine.adminKey;
    const items = async () =>
      (await send(server.baseUrl, 'GET', '/v1/items', key)).json.data.map((item: { sku: string }) => item.sku);
    const itemsBefore = await items();
    expect((await send(server.baseUrl, 'GET', '/health/ready', undefined)).status).toBe(200);

    const list = await send(server.baseUrl, 'GET', '/v1/users', key);
    expect(list).toMatchObject({ status: 503, json: { type: '/problems/storage-corrupt' } });

    // The other worker hears it through the primary: poll until it does, bounded.
    const deadline = Date.now() + 10_000;
    let readiness: number[] = [];
    while (Date.now() < deadline) {
      readiness = [];
      for (let probe = 0; probe < 4; probe++)
        readiness.push((await send(server.baseUrl, 'GET', '/health/ready', undefined)).status);
      if (readiness.every((status) => status === 503)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(readiness).toEqual([503, 503, 503, 503]);
    for (let write = 0; write < 4; write++) {
      expect(await send(server.baseUrl, 'POST', '/v1/items', key, buildItem())).toMatchObject({
        status: 503,
        json: { type: '/problems/storage-corrupt' },
      });
    }
    expect(await items()).toEqual(itemsBefore);

    const log = server
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; worker: number; msg: string });
    // The storage's own line, once per worker; the audit trail's writer names the fault in its line too (below).
    const lines = log.filter((line) => line.msg.startsWith('SQLite ') && line.msg.includes('is damaged'));
    expect(lines.map((line) => line.level).sort()).toEqual([40, 50]);
    expect(new Set(lines.map((line) => line.worker))).toEqual(new Set([1, 2]));
    expect(lines.find((line) => line.level === 50)!.msg).toContain('database disk image is malformed');
    expect(lines.find((line) => line.level === 40)!.msg).toContain('another process on the same file found it damaged');
    // Besides, each worker's audit trail says once that its events wait in memory; nothing is said per request.
    const others = log.filter((line) => line.level >= 40 && !lines.includes(line)).map((line) => line.msg);
    expect(others.filter((msg) => !msg.startsWith('could not write the audit trail'))).toEqual([]);
    expect(others.length).toBeLessThanOrEqual(2);
  });
});
