import { readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { keptLog, type LogLine } from '../helpers/log.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Requests whose client sends half a body and closes its connection (docs/operations.md, the
 * logs; docs/security.md "Audit trail"): over a real socket, each is in the audit trail with status
 * 499 and has one short info line, never an error with a stack; nothing of it is stored.
 */
let test: TestApp;
let port: number;
let spool: string;
let log: LogLine[];
beforeAll(async () => {
  const kept = keptLog('info');
  log = kept.log;
  spool = join(tempFolder('abandoned'), 'spool');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: spool, ROWI_AUDIT_FLUSH_INTERVAL: '20' }, kept.logger);
  port = Number(new URL(await test.app.listen({ host: '127.0.0.1', port: 0 })).port);
});
afterAll(() => test.close());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends the head of a request and `half` of its body (Content-Length announcing twice as much, or
 * chunked), waits until rowi has read it, then closes the connection.
 */
async function sendHalf(
  requestId: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  half: Buffer,
  chunked = false,
) {
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.on('error', () => {});
  const head = Object.entries({
    host: 'rowi',
    'x-api-key': test.adminKey,
    'x-request-id': requestId,
    ...headers,
    ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(half.length * 2) }),
  })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n`);
  socket.write(
    chunked ? Buffer.concat([Buffer.from(`${half.length.toString(16)}\r\n`), half, Buffer.from('\r\n')]) : half,
  );
  await sleep(150);
  socket.destroy();
}

async function auditedStatus(requestId: string): Promise<number | undefined> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const [event] = await test.storage.db
      .selectFrom('audit_events')
      .select(['status', 'method', 'path'])
      .where('request_id', '=', requestId)
      .execute();
    if (event !== undefined) return event.status;
    await sleep(20);
  }
  return undefined;
}

const rows = Buffer.from(`sku,name,price\n${'AB-1,Abacus,1.00\n'.repeat(2000)}`);

describe('requests abandoned halfway through their body', () => {
  it.each([
    {
      what: 'a CSV file (Content-Length)',
      method: 'POST',
      path: '/v1/items/import',
      headers: { 'content-type': 'text/csv' },
      half: rows,
      chunked: false,
    },
    {
      what: 'a CSV file (chunked)',
      method: 'POST',
      path: '/v1/items/import',
      headers: { 'content-type': 'text/csv' },
      half: rows,
      chunked: true,
    },
    {
      what: 'a gzip CSV file (chunked)',
      method: 'POST',
      path: '/v1/items/import',
      headers: { 'content-type': 'text/csv', 'content-encoding': 'gzip' },
      half: gzipSync(rows).subarray(0, 200),
      chunked: true,
    },
    {
      what: 'a JSON body',
      method: 'POST',
      path: '/v1/users',
      headers: { 'content-type': 'application/json' },
      half: Buffer.from('{"name":"Half","email":"half@exa'),
      chunked: false,
    },
    {
      what: 'a batch (chunked)',
      method: 'POST',
      path: '/v1/users/batch',
      headers: { 'content-type': 'application/json' },
      half: Buffer.from('{"create":[{"name":"Half",'),
      chunked: true,
    },
    {
      what: 'an XML body',
      method: 'POST',
      path: '/v1/users',
      headers: { 'content-type': 'application/xml' },
      half: Buffer.from('<user><name>Half</name><em'),
      chunked: false,
    },
  ])(
    '$method $path: audited with status 499 and one info line, no error, nothing stored, when the client sends half of $what and closes',
    async ({ method, path, headers, half, chunked }) => {
      const requestId = `abandoned-${Math.random().toString(36).slice(2)}`;
      const operationsBefore = await test.storage.db.selectFrom('operations').select('id').execute();
      await sendHalf(requestId, method, path, headers as Record<string, string>, half, chunked);

      expect(await auditedStatus(requestId)).toBe(499);
      const lines = log.filter((line) => line.reqId === requestId);
      expect(lines).toEqual([
        expect.objectContaining({
          level: 30,
          msg: 'request abandoned: the client closed its connection before the answer',
          status: 499,
          method,
          path,
        }),
      ]);
      expect(lines[0]).not.toHaveProperty('err');
      expect(log.filter((line) => line.level >= 40)).toEqual([]);
      expect(await test.storage.db.selectFrom('operations').select('id').execute()).toEqual(operationsBefore);
      expect((await test.call({ url: '/v1/users?email=half@example.com' })).json.data).toEqual([]);
      // The spooled part is removed as the request ends, which may be just after its audit record.
      await expect.poll(() => readdirSync(spool).filter((name) => name.endsWith('.upload'))).toEqual([]);
    },
  );
});
