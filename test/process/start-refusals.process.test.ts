import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli, serverPool, tempDataFile } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';
import { mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.js';

/**
 * A start that cannot serve ends at once, as a bad setting does (README "Quick start",
 * docs/operations.md "Configuration"): one line naming what to change, exit code 2, no stack trace,
 * no first admin; with one process and with --workers. The built CLI, as a user runs it.
 */
const servers = serverPool();
afterEach(() => servers.killAll());

/** What a refused start wrote: exactly one line on stderr, no stack, nothing listening, no admin key. */
function expectOneLineRefusal(result: { code: number | null; stdout: string; stderr: string }, says: string[]) {
  expect(result.code, result.stderr).toBe(2);
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  for (const words of says) expect(lines[0]).toContain(words);
  expect(result.stderr).not.toMatch(/^\s+at |Error:|ROWI_KEY=/m);
  expect(result.stdout).not.toContain('listening on');
}

describe('rowi serve: a port in use', () => {
  let taken: Server;
  let port: number;
  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen({ host: '127.0.0.1', port: 0 }, resolve));
    port = (taken.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => taken.close(() => resolve())));

  it.each([
    ['one process', ['serve'], { ROWI_WORKERS: '1' }],
    ['--workers 2', ['serve', '--workers', '2'], {}],
    ['--port', ['serve', '--port', 'PORT'], { ROWI_WORKERS: '1' }],
  ])(
    'rowi serve (%s): exit code 2 with one line naming the port, ROWI_PORT and --port, no stack, when the port is in use',
    async (_name, args, env) => {
      const dataFile = tempDataFile();
      const result = await runCli(
        args.map((arg) => (arg === 'PORT' ? String(port) : arg)),
        { ROWI_DATA: dataFile, ROWI_HOST: '127.0.0.1', ROWI_PORT: String(port), ROWI_LOG_LEVEL: 'info', ...env },
        30_000,
      );
      expectOneLineRefusal(result, [`rowi: port ${port} is in use (127.0.0.1:${port})`, 'ROWI_PORT', '--port']);
    },
  );
});

describe('rowi serve: folders it cannot write', () => {
  /** A path under a regular file: no one, root included, can make a folder there. */
  function underAFile(): string {
    const folder = tempFolder('unwritable');
    writeFileSync(join(folder, 'a-file'), 'not a folder');
    return join(folder, 'a-file', 'spool');
  }

  it.each([
    ['ROWI_IMPORT_DIRECTORY', 'one process', ['serve'], { ROWI_WORKERS: '1' }],
    ['ROWI_IMPORT_DIRECTORY', '--workers 2', ['serve', '--workers', '2'], {}],
    ['ROWI_BACKUP_DIR', 'one process', ['serve'], { ROWI_WORKERS: '1' }],
    ['ROWI_BACKUP_DIR', '--workers 2', ['serve', '--workers', '2'], {}],
  ])(
    'rowi serve: exit code 2 with one line naming %s and the folder (%s), before listening, when the folder is under a file',
    async (setting, _name, args, env) => {
      const folder = underAFile();
      const result = await runCli(
        [...args, '--port', '0'],
        { ROWI_DATA: tempDataFile(), ROWI_HOST: '127.0.0.1', ROWI_LOG_LEVEL: 'info', [setting]: folder, ...env },
        30_000,
      );
      expectOneLineRefusal(result, [`rowi: ${setting}: rowi cannot write files into the folder ${folder}`, 'ENOTDIR']);
    },
  );

  it('rowi serve: exit code 2 naming ROWI_IMPORT_DIRECTORY when the folder is a read-only file system', async () => {
    const folder = tempFolder('read-only');
    if (!mountTmpfs(folder, '1m', 'a read-only import folder', { readOnly: true })) return;
    try {
      const result = await runCli(['serve', '--port', '0'], {
        ROWI_DATA: tempDataFile(),
        ROWI_HOST: '127.0.0.1',
        ROWI_WORKERS: '1',
        ROWI_IMPORT_DIRECTORY: folder,
      });
      expectOneLineRefusal(result, [
        `rowi: ROWI_IMPORT_DIRECTORY: rowi cannot write files into the folder ${folder}`,
        'read-only file system, EROFS',
      ]);
    } finally {
      unmountTmpfs(folder);
    }
  });

  it('rowi serve: a folder that does not exist yet is created, and imports go there', async () => {
    const root = tempFolder('new-folders');
    const imports = join(root, 'not', 'yet', 'imports');
    const backups = join(root, 'not', 'yet', 'backups');
    mkdirSync(join(root, 'not'));
    const server = await servers.serve({
      dataFile: tempDataFile(),
      env: { ROWI_IMPORT_DIRECTORY: imports, ROWI_BACKUP_DIR: backups },
    });
    expect(existsSync(imports)).toBe(true);
    expect(existsSync(backups)).toBe(true);
    const reply = await fetch(`${server.baseUrl}/v1/items/import`, {
      method: 'POST',
      headers: { 'content-type': 'text/csv', 'x-api-key': server.adminKey },
      body: 'sku,name,price\nNEW-1,Nib,1.00\n',
    });
    expect(reply.status).toBe(202);
    await reply.arrayBuffer();
  });
});
