import type { FastifyError, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { isCorruption, isDiskFull, isUnavailable } from '../../src/db/driver-errors.js';
import { toAppError } from '../../src/http/problem.js';

/**
 * Database errors by meaning, on both drivers. A real full disk is tested on SQLite
 * (disk-full.test.ts); PostgreSQL's disk_full cannot be provoked here, so its mapping is checked
 * on the error pg reports.
 */
const request = { url: '/v1/users', routeOptions: { bodyLimit: 1024 } } as unknown as FastifyRequest;
const errorOf = (fields: Record<string, unknown>) =>
  Object.assign(new Error(String(fields.message ?? 'database error')), fields) as unknown as FastifyError;

describe('database errors', () => {
  it.each([
    ['SQLite SQLITE_FULL', { code: 'SQLITE_FULL', message: 'database or disk is full' }],
    [
      'PostgreSQL disk_full (53100)',
      { code: '53100', message: 'could not extend file "base/16384/16385": No space left on device' },
    ],
  ])('%s: 507 insufficient-storage with Retry-After 30', (_case, fields) => {
    const error = errorOf(fields);
    expect(isDiskFull(error)).toBe(true);
    expect(isUnavailable(error)).toBe(false);
    const problem = toAppError(error, request);
    expect({ type: problem?.type, status: problem?.status, retryAfter: problem?.headers?.['retry-after'] }).toEqual({
      type: 'insufficient-storage',
      status: 507,
      retryAfter: '30',
    });
  });

  it.each([
    ['SQLITE_BUSY', { code: 'SQLITE_BUSY' }],
    ['PostgreSQL 57014 (statement timeout)', { code: '57014' }],
  ])('%s: 503 service-unavailable, not a full disk', (_case, fields) => {
    const error = errorOf(fields);
    expect(isDiskFull(error)).toBe(false);
    expect(toAppError(error, request)?.status).toBe(503);
  });

  it.each([
    ['better-sqlite3 SQLITE_CORRUPT', { code: 'SQLITE_CORRUPT', message: 'database disk image is malformed' }],
    [
      'better-sqlite3 SQLITE_CORRUPT_INDEX',
      { code: 'SQLITE_CORRUPT_INDEX', message: 'database disk image is malformed' },
    ],
    ['better-sqlite3 SQLITE_NOTADB', { code: 'SQLITE_NOTADB', message: 'file is not a database' }],
    [
      'node:sqlite SQLITE_CORRUPT (11)',
      { code: 'ERR_SQLITE_ERROR', errcode: 11, message: 'database disk image is malformed' },
    ],
    [
      'node:sqlite SQLITE_CORRUPT_INDEX (779)',
      { code: 'ERR_SQLITE_ERROR', errcode: 779, message: 'database disk image is malformed' },
    ],
    ['node:sqlite SQLITE_NOTADB (26)', { code: 'ERR_SQLITE_ERROR', errcode: 26, message: 'file is not a database' }],
    [
      'PostgreSQL data_corrupted (XX001)',
      { code: 'XX001', message: 'invalid page in block 0 of relation base/16384/16385' },
    ],
    [
      'PostgreSQL index_corrupted (XX002)',
      { code: 'XX002', message: 'index "users_email_key_unique" contains unexpected zero page at block 0' },
    ],
  ])('%s: 503 storage-corrupt with Retry-After 60, not a full disk or an outage', (_case, fields) => {
    const error = errorOf(fields);
    expect(isCorruption(error)).toBe(true);
    expect(isDiskFull(error)).toBe(false);
    expect(isUnavailable(error)).toBe(false);
    const problem = toAppError(error, request);
    expect({ type: problem?.type, status: problem?.status, retryAfter: problem?.headers?.['retry-after'] }).toEqual({
      type: 'storage-corrupt',
      status: 503,
      retryAfter: '60',
    });
  });
});
