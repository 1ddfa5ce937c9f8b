import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type, { type TSchema, type TString } from 'typebox';
import { toTimestamp } from '../db/clock.js';
import type { ListCondition, ListQuery, SortKey } from '../db/keyset.js';
import { BadRequestError } from '../errors.js';
import { answerSelected, fieldsParameter, type FieldSelection, type Selectable } from './fields.js';
import { Timestamp } from './schemas.js';

/**
 * Collections (docs/conventions.md): keyset cursor paging, equality and time-range filters and `sort`, all
 * declared per resource in a CollectionSpec and enforced here. The same declaration produces
 * the query-string schema (validation and OpenAPI) and the ListQuery the repository runs.
 */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;

/**
 * One filter parameter: the column compared, and how. A filter whose parameter is a string may turn
 * it into the stored form first (lower-cased email, normalised timestamp…). `under` takes a path
 * and selects it and the paths below it (db/keyset.ts); `between` turns its value into an
 * inclusive range of integers (a status class, 4xx → 400–499); `contains` selects the records holding
 * its text in any of several columns (`q`, searchFilter).
 */
export type FilterSpec =
  | ({
      column: string;
      operator: '=' | '>' | '<';
    } & ({ schema: TString; normalize?: (value: string) => string | number } | { schema: TSchema; normalize?: never }))
  | { column: string; operator: 'under'; schema: TString }
  | { column: string; operator: 'between'; schema: TSchema; range: (value: string) => readonly [number, number] }
  | { columns: readonly string[]; operator: 'contains'; schema: TString };

export interface CollectionSpec {
  /** Fields callers may sort by, with their JSON type; each is a non-null column of that name. */
  sortable: Record<string, 'string' | 'integer'>;
  filters: Record<string, FilterSpec>;
  /** The order when the caller gives no sort; `id` (oldest first) unless said otherwise. */
  defaultSort?: string;
  /** `?id=1,2,3`: the records of those ids (docs/reading.md "Many records by id"). */
  ids?: IdsSpec;
}

export interface IdsSpec {
  /** The column the ids are of (`id`; `item_id` for stock). */
  column: string;
  /** One id, as a regular expression without anchors. */
  pattern: string;
  integer: boolean;
  /** What an id is, for the refusal's text ("positive integers"). */
  says: string;
}

/** Ids of records: positive integers of at most 16 digits, as every record's id. */
export const INTEGER_IDS: IdsSpec = {
  column: 'id',
  pattern: '[1-9][0-9]{0,15}',
  integer: true,
  says: 'positive integers',
};

/** How many ids one request may name: a page's most. */
export const MAX_IDS = MAX_LIMIT;

function idsSchema(ids: IdsSpec) {
  const one = Type.String({
    pattern: `^${ids.pattern}(?:,${ids.pattern})*$`,
    // Long enough for MAX_IDS ids of 32 characters and their commas: more is refused by count below.
    maxLength: MAX_IDS * 33,
    'x-error': `must be at most ${MAX_IDS} ids (${ids.says}), comma-separated or in repeated id= parameters`,
  });
  return Type.Union([one, Type.Array(one, { maxItems: MAX_IDS })], {
    description: `only the records of these ids (${ids.says}), comma-separated or repeated, at most ${MAX_IDS}; ids that do not exist or that the caller may not see are absent`,
  });
}

/**
 * An exclusive time bound on a timestamp column: `after` (>) or `before` (<). Any RFC 3339 offset
 * is accepted and compared in rowi's stored form (UTC, milliseconds), so the comparison of text
 * columns is a comparison of instants.
 */
export function timeBound(
  column: string,
  bound: 'after' | 'before',
  subject: string,
): { schema: TString; column: string; operator: '>' | '<'; normalize: (value: string) => string } {
  return {
    schema: Type.String({ ...Timestamp, description: `only ${subject} strictly ${bound} this instant (RFC 3339)` }),
    column,
    operator: bound === 'after' ? '>' : '<',
    normalize: (value: string) => toTimestamp(value) ?? value,
  };
}

/**
 * `q`: the records whose `fields` (columns of those names) hold the text anywhere, ignoring the case
 * of ASCII letters (db/keyset.ts says why no others). A filter like any other: it combines with the
 * rest, the sort and the cursor.
 */
export function searchFilter(fields: readonly string[]): { q: FilterSpec } {
  return {
    q: {
      schema: Type.String({
        minLength: 1,
        maxLength: 200,
        description: `only records whose ${fields.join(' or ')} contains this text, ignoring the case of A–Z`,
      }),
      columns: fields,
      operator: 'contains',
    },
  };
}

/** created_after / created_before, exclusive bounds on created_at. */
export const CREATED_RANGE_FILTERS = {
  created_after: timeBound('created_at', 'after', 'records created'),
  created_before: timeBound('created_at', 'before', 'records created'),
} satisfies Record<string, FilterSpec>;

/**
 * The query-string schema of a collection: paging, sort and its filters, `fields` when its records
 * are given (http/fields.ts), nothing else (400).
 */
export function listQuerySchema(spec: CollectionSpec, selectable?: Selectable) {
  const sortFields = Object.keys(spec.sortable);
  const filters = Object.fromEntries(
    Object.entries(spec.filters).map(([name, filter]) => [name, Type.Optional(filter.schema)]),
  );
  return Type.Object(
    {
      limit: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: MAX_LIMIT,
          default: DEFAULT_LIMIT,
          description: `page size, 1–${MAX_LIMIT}`,
        }),
      ),
      cursor: Type.Optional(
        Type.String({ minLength: 1, maxLength: 2048, description: 'next_cursor of the previous page' }),
      ),
      sort: Type.Optional(
        Type.String({
          pattern: `^-?(?:${sortFields.join('|')})(?:,-?(?:${sortFields.join('|')}))*$`,
          'x-error': `must be a comma-separated list of ${sortFields.join(', ')}, each optionally prefixed with - for descending order`,
          description: `comma-separated sort fields (${sortFields.join(', ')}); prefix - for descending; ties are broken by id`,
        }),
      ),
      ...filters,
      ...(spec.ids ? { id: Type.Optional(idsSchema(spec.ids)) } : {}),
      ...(selectable ? { fields: fieldsParameter(selectable) } : {}),
    },
    { additionalProperties: false },
  );
}

/** Validated query string → the ListQuery a repository runs. Throws 400 for a bad sort or cursor. */
export function parseListQuery(spec: CollectionSpec, query: Record<string, unknown>): ListQuery {
  const order = parseSort(spec, typeof query.sort === 'string' ? query.sort : (spec.defaultSort ?? 'id'));
  const conditions: ListQuery['conditions'] = Object.entries(spec.filters)
    .filter(([name]) => query[name] !== undefined)
    .map(([name, filter]) => conditionOf(filter, query[name]));
  const ids = spec.ids && query.id !== undefined ? parseIds(spec.ids, query.id as string | string[]) : undefined;
  if (ids) conditions.push({ column: spec.ids!.column, operator: 'in', value: ids });
  return {
    // Asked by id, a page holds them all unless limit says otherwise.
    limit: typeof query.limit === 'number' ? query.limit : ids ? MAX_IDS : DEFAULT_LIMIT,
    order,
    conditions,
    after: typeof query.cursor === 'string' ? parseCursor(spec, query.cursor, order) : undefined,
  };
}

/** A filter's condition on its value; the query string was validated against the filter's schema. */
function conditionOf(filter: FilterSpec, value: unknown): ListCondition {
  if (filter.operator === 'contains') return { columns: filter.columns, operator: 'contains', value: value as string };
  const { column } = filter;
  switch (filter.operator) {
    case 'under':
      return { column, operator: 'under', value: value as string };
    case 'between':
      return { column, operator: 'between', value: filter.range(value as string) };
    default:
      // A string where the filter normalises.
      return {
        column,
        operator: filter.operator,
        value: filter.normalize ? filter.normalize(value as string) : (value as string | number),
      };
  }
}

/** The distinct ids of `id=` (comma-separated, repeated or both), at most MAX_IDS. */
function parseIds(spec: IdsSpec, value: string | string[]): (string | number)[] {
  const named = new Set((Array.isArray(value) ? value : [value]).flatMap((list) => list.split(',')));
  if (named.size > MAX_IDS)
    throw badQuery('id', `names ${named.size} ids; at most ${MAX_IDS} may be asked for at once`);
  const ids = [...named].map((id) => (spec.integer ? Number(id) : id));
  const unsafe = ids.find((id) => typeof id === 'number' && !Number.isSafeInteger(id));
  if (unsafe !== undefined) throw badQuery('id', `names ${unsafe}, past the largest id (${Number.MAX_SAFE_INTEGER})`);
  return ids;
}

function parseSort(spec: CollectionSpec, sort: string): SortKey[] {
  const order: SortKey[] = [];
  for (const term of sort.split(',')) {
    const descending = term.startsWith('-');
    const field = descending ? term.slice(1) : term;
    if (!(field in spec.sortable))
      throw badQuery('sort', `cannot sort by ${field}; sortable fields are ${Object.keys(spec.sortable).join(', ')}`);
    if (order.some((key) => key.column === field)) throw badQuery('sort', `names ${field} twice`);
    order.push({ column: field, direction: descending ? 'desc' : 'asc' });
  }
  // id is unique, so it makes every sort total: the keyset needs a strict order.
  if (!order.some((key) => key.column === 'id')) order.push({ column: 'id', direction: 'asc' });
  return order;
}

function signature(order: SortKey[]): string {
  return order.map((key) => (key.direction === 'desc' ? `-${key.column}` : key.column)).join(',');
}

function parseCursor(spec: CollectionSpec, cursor: string, order: SortKey[]): (string | number)[] {
  const position = decodeCursor(cursor);
  if (!position)
    throw badQuery(
      'cursor',
      'is not a cursor this API issued (it may be truncated or altered); start again without it',
    );
  if (position.sort !== signature(order)) {
    throw badQuery(
      'cursor',
      `was issued for sort=${position.sort}; repeat that sort, or start again without the cursor`,
    );
  }
  const typesMatch =
    position.values.length === order.length &&
    order.every((key, index) => {
      const value = position.values[index];
      return spec.sortable[key.column] === 'integer' ? Number.isSafeInteger(value) : typeof value === 'string';
    });
  if (!typesMatch) throw badQuery('cursor', 'is not a cursor this API issued; start again without it');
  return position.values;
}

function badQuery(parameter: string, detail: string): BadRequestError {
  return new BadRequestError(
    `Query parameter ${parameter} ${detail}.`,
    [{ in: 'query', pointer: `#/${parameter}`, detail }],
    'invalid-query',
  );
}

/** The collection envelope's schema: `{data: [...], next_cursor}` (docs/conventions.md). */
export function pageSchema(item: TSchema & { xml?: { name?: string }; title?: string }, rootName: string) {
  return Type.Object(
    {
      data: Type.Array(item, { maxItems: MAX_LIMIT, xml: { wrapped: true } }),
      next_cursor: Type.Union([Type.String({ maxLength: 2048 }), Type.Null()], {
        description: 'pass as cursor to get the next page; null on the last page',
      }),
    },
    {
      additionalProperties: false,
      xml: { name: rootName },
      ...(item.title === undefined ? {} : { title: `${item.title}Page` }),
    },
  );
}

export interface Page<Row> {
  rows: Row[];
  /** Sort-key values of the last row when another page follows. */
  nextAfter: (string | number)[] | undefined;
}

/**
 * Sends a page: the envelope, and a Link header (RFC 8288) to the next page that repeats the
 * request's own query with the new cursor. With `fields`, each record has only those fields.
 */
export function sendPage<Row>(
  request: FastifyRequest,
  reply: FastifyReply,
  page: Page<Row>,
  query: ListQuery,
  fields?: FieldSelection,
) {
  const nextCursor = page.nextAfter ? encodeCursor({ sort: signature(query.order), values: page.nextAfter }) : null;
  if (nextCursor) {
    const target = new URL(request.url, 'http://rowi.invalid');
    target.searchParams.set('cursor', nextCursor);
    reply.header('link', `<${target.pathname}${target.search}>; rel="next"`);
  }
  if (!fields) return reply.send({ data: page.rows, next_cursor: nextCursor });
  answerSelected(request, reply);
  return reply.send({ data: page.rows.map(fields.pick), next_cursor: nextCursor });
}

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
  return createHash('sha256')
    .update(`rowi-cursor-v1:${payload}`)
    .digest()
    .subarray(0, CHECK_BYTES)
    .toString('base64url');
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
