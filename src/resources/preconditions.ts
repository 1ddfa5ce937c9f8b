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
 * may send back what it read), and refused with 422 otherwise (docs/guide.md "Conventions"). Timestamps
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
 * Runs a read-check-write of one row: locks it (lockRow), then reads, checks and writes. `attempt`
 * returns undefined when its write found the row at another version than it read; with the row
 * locked that cannot happen, so the loop is a safety net, never the way concurrent writes meet:
 * a request without If-Match never fails a precondition, and one with If-Match is checked against
 * the version its write lands on.
 */
export async function withRowLocked<T>(
  trx: Trx,
  row: { table: LockableTable; id: number },
  attempt: () => Promise<T | undefined>,
  what: string,
): Promise<T> {
  await lockRow(trx, row.table, row.id);
  for (let round = 0; round < 3; round++) {
    const result = await attempt();
    if (result !== undefined) return result;
  }
  throw changedConcurrently(what);
}

/** A write that found its row at another version than it checked, more often than it retries. */
export function changedConcurrently(what: string): PreconditionFailedError {
  return new PreconditionFailedError(`${what} is being changed concurrently; retry.`);
}
