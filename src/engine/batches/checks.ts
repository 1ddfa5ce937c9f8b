import { AppError, type FieldError } from '../../errors.js';

/**
 * What a batch (engine/batches/batch.ts) is checked for before any entry runs, pure: how many entries it holds,
 * a batch inside an entry, and two entries that name one record. Each refusal points at every
 * entry concerned, so one answer says all that is wrong with the batch's shape.
 */

/** Every member any collection's batch has: an entry holding one of these holds a batch. */
export const BATCH_KEYS = ['create', 'replace', 'change', 'delete', 'set', 'adjust'] as const;

export class BatchInvalidError extends AppError {
  constructor(detail: string, errors: FieldError[]) {
    super('batch-invalid', detail, { errors });
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Entries in the members' arrays of a batch body (0 when it is not a batch's shape; the schema then says why). */
export function countEntries(body: unknown, members: readonly string[]): number {
  if (!isObject(body)) return 0;
  let count = 0;
  for (const member of members) {
    const entries = body[member];
    if (Array.isArray(entries)) count += entries.length;
  }
  return count;
}

/** An entry that holds a batch's member as an array: batches do not nest. */
export function nestedErrors(body: unknown, members: readonly string[]): FieldError[] {
  if (!isObject(body)) return [];
  const errors: FieldError[] = [];
  for (const member of members) {
    const entries = body[member];
    if (!Array.isArray(entries)) continue;
    entries.forEach((entry, index) => {
      if (!isObject(entry)) return;
      for (const key of BATCH_KEYS)
        if (Array.isArray(entry[key]))
          errors.push({
            in: 'body',
            pointer: `#/${member}/${index}/${key}`,
            detail: 'is a batch inside a batch entry; batches do not nest',
          });
    });
  }
  return errors;
}

interface Member {
  member: string;
  entries: unknown[];
  targets: ((entry: unknown) => string[]) | undefined;
}

/** Each entry after the first that names a record another entry named, with where that one is. */
export function duplicateErrors(members: readonly Member[]): FieldError[] {
  const seen = new Map<string, string>();
  const errors: FieldError[] = [];
  for (const { member, entries, targets } of members) {
    if (targets === undefined) continue;
    entries.forEach((entry, index) => {
      const pointer = `#/${member}/${index}`;
      for (const target of targets(entry)) {
        const first = seen.get(target);
        if (first === undefined) {
          seen.set(target, pointer);
          continue;
        }
        errors.push({ in: 'body', pointer, detail: `names the same record as ${first} (${target})` });
        break;
      }
    });
  }
  return errors;
}
