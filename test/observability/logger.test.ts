import { Writable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { faultOf, loggerOptions } from '../../src/observability/logger.js';

/** rowi's logger writing into `lines` (the raw JSON text of each line). */
function logger(lines: string[]): pino.Logger {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return pino(loggerOptions('info'), sink);
}

/** An error as pg's pool emits it for a lost idle connection: the whole client hung on it. */
function lostConnection(): Error {
  const error = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' });
  const client = new pg.Client({ host: '127.0.0.1', port: 1, user: 'rowi', password: 'secret' });
  Object.assign(client, {
    processID: 4242,
    secretKey: 987654321,
    preparedStatements: Object.fromEntries(
      Array.from({ length: 60 }, (_, n) => [
        `s${n}`,
        `select id, name, email from users where id = $${n} -- ${'x'.repeat(300)}`,
      ]),
    ),
  });
  return Object.assign(error, { client });
}

describe('the log', () => {
  it('an error logged as err keeps its type, message, stack and plain facts (code, errno, syscall) and the message of its cause, never an object a driver hung on it', () => {
    const lines: string[] = [];
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
      code: 'ECONNREFUSED',
      socket: { huge: 'y'.repeat(5000) },
    });
    logger(lines).warn({ err: Object.assign(lostConnection(), { cause }) }, 'request failed');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.length).toBeLessThan(3000);
    const { err } = JSON.parse(lines[0]!) as { err: Record<string, unknown> };
    expect(err).toMatchObject({ type: 'Error', code: 'ECONNRESET', errno: -104, syscall: 'read' });
    // pino folds the cause into the message and the stack.
    expect(err.message).toBe('read ECONNRESET: connect ECONNREFUSED 127.0.0.1:5432');
    expect(err.stack).toMatch(/^Error: read ECONNRESET\n/);
    expect(err.client).toBeUndefined();
    expect(lines[0]).not.toContain('yyyy');
    expect(lines[0]).not.toContain('987654321');
    expect(lines[0]).not.toContain('secret');
    expect(lines[0]).not.toContain('select id');
  });

  it('faultOf names a fault in a few words: the message, with the code when the message lacks it', () => {
    expect(faultOf(lostConnection())).toBe('read ECONNRESET');
    const terminated = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    expect(faultOf(terminated)).toBe('terminating connection due to administrator command (57P01)');
    expect(faultOf(new Error(`Connection terminated unexpectedly\n${'at x\n'.repeat(50)}`))).toBe(
      'Connection terminated unexpectedly',
    );
    expect(faultOf('timeout')).toBe('timeout');
  });
});
