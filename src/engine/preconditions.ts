import type { Trx } from '../db/database.js';
import { lockRow, type LockableTable } from '../db/versioned.js';
import { PreconditionFailedError, UnprocessableError, type FieldError } from '../errors.js';
import type { UpsertCondition, VersionCondition } from '../http/records.js';

/**
 * What a write checks before it changes a versioned record: the condition of a conditional
 * request (If-Match, turned by the route into a VersionCondition, http/records.ts) against the
 * stored version, and the rule for read-only fields echoed back in a PUT or PATCH body.
 */

/**
 * If-Match on a request that creates its target when there is none (PUT or PATCH of a place):
 * any If-Match fails, since there is no current representation to match (RFC 9110 §13.1.1).
 */
export function assertMayCreate(condition: UpsertCondition, what: string): void {
  if (condition.present)
    throw new PreconditionFailedError(
      `${what} does not exist yet, so If-Match cannot match; send the request without If-Match to create it.`,
    );
}

export function assertCondition(condition: VersionCondition, storedVersion: number, what: string): void {
  if (!condition(storedVersion)) {
    throw new PreconditionFailedError(
      `${what} has changed since the ETag in If-Match was issued; GET it again and retry with the new ETag.`,
    );
  }
}

interface ReadOnlyFields {
  id: number;
  created_at: string;
  updated_at: string;
}

/**
 * A read-only field in a PUT/PATCH body is ignored when it equals the stored value (so a client
 * may send back what it read), and refused with 422 otherwise (docs/conventions.md). Timestamps
 * are compared as instants, so "…:00Z" equals "…:00.000Z". `others` names further read-only
 * fields of the resource that differ, so that one problem lists them all.
 */
export function assertReadOnlyEchoes(
  stored: ReadOnlyFields,
  body: Partial<ReadOnlyFields>,
  others: string[] = [],
): void {
  assertEchoesMatch([
    ...(body.id !== undefined && body.id !== stored.id ? ['id'] : []),
    ...(['created_at', 'updated_at'] as const).filter((field) => !sameInstant(body[field], stored[field])),
    ...others,
  ]);
}

/** True when an echoed timestamp is absent or names the same instant as the stored one. */
export function sameInstant(echoed: string | undefined, stored: string): boolean {
  return echoed === undefined || Date.parse(echoed) === Date.parse(stored);
}

/** 422 read-only-field naming each read-only field whose echoed value differs from the stored one. */
export function assertEchoesMatch(differing: string[]): void {
  if (differing.length === 0) return;
  const errors: FieldError[] = differing.map((field) => ({
    in: 'body',
    pointer: `#/${field}`,
    detail: 'is read-only and differs from the stored value',
  }));
  throw new UnprocessableError(
    `The body changes read-only fields: ${errors.map((error) => error.pointer).join(', ')}.`,
    errors,
    'read-only-field',
  );
}

/**
 * What a read-check-write under withRowLocked did: wrote (or found nothing to change), answering
 * `result`; or found its row at another version than it read, which its conditional write
 * (`… WHERE version = :read`) tells by changing no row.
 */
export type LockedWrite<T> = { outcome: 'written'; result: T } | { outcome: 'version-moved' };

export const written = <T>(result: T): LockedWrite<T> => ({ outcome: 'written', result });
/** A delete that was done: it answers nothing. */
export const DELETED: LockedWrite<void> = written(undefined);
export const VERSION_MOVED: LockedWrite<never> = { outcome: 'version-moved' };

/**
 * Runs a read-check-write of one row: locks it (lockRow), then reads, checks and writes. With
 * the row locked until the transaction ends, no other write can move its version between the
 * read and the write, so `attempt` is never retried: a request without If-Match never fails a
 * precondition, and one with If-Match is checked against the version its write lands on
 * (test/resources/concurrent-writes.test.ts, on both databases). Were the version to move anyway,
 * the answer is the 412 that tells the client to retry, never a write over a change unseen.
 */
export async function withRowLocked<T>(
  trx: Trx,
  row: { table: LockableTable; id: number },
  attempt: () => Promise<LockedWrite<T>>,
  what: string,
): Promise<T> {
  await lockRow(trx, row.table, row.id);
  const done = await attempt();
  if (done.outcome === 'written') return done.result;
  throw changedConcurrently(what);
}

/** A write that found its row at another version than it checked. */
export function changedConcurrently(what: string): PreconditionFailedError {
  return new PreconditionFailedError(`${what} is being changed concurrently; retry.`);
}
