import { createHash } from 'node:crypto';

/**
 * Keyset cursors: the sort keys of the last row of a page, so the next page starts strictly
 * after it whatever was inserted meanwhile. A cursor is opaque to callers: base64url JSON plus
 * a check value, so that a truncated, altered or made-up cursor is refused (400) instead of
 * silently paging from somewhere else. It is not a secret: it only says where a page starts,
 * and every filter of the request is still applied.
 */
export interface CursorPosition {
  /** The sort the cursor was made for, e.g. "name,-created_at,id". */
  sort: string;
  /** The last row's values of those sort keys, in order. */
  values: (string | number)[];
}

const CHECK_BYTES = 9;

function check(payload: string): string {
  return createHash('sha256').update(`rowi-cursor-v1:${payload}`).digest().subarray(0, CHECK_BYTES).toString('base64url');
}

export function encodeCursor(position: CursorPosition): string {
  const payload = Buffer.from(JSON.stringify([position.sort, ...position.values])).toString('base64url');
  return `${payload}.${check(payload)}`;
}

/** The position a cursor holds, or undefined when it is not one rowi made. */
export function decodeCursor(cursor: string): CursorPosition | undefined {
  const [payload, checkValue, extra] = cursor.split('.');
  if (!payload || !checkValue || extra !== undefined || check(payload) !== checkValue) return undefined;
  try {
    const decoded: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (!Array.isArray(decoded) || typeof decoded[0] !== 'string') return undefined;
    const [sort, ...values] = decoded as unknown[];
    if (!values.every((value) => typeof value === 'string' || typeof value === 'number')) return undefined;
    return { sort: sort as string, values: values as (string | number)[] };
  } catch {
    return undefined;
  }
}
