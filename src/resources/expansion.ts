import type { FastifyReply, FastifyRequest } from 'fastify';
import Type, { type TObject, type TSchema } from 'typebox';
import type { Db } from '../db/database.js';
import type { ListQuery } from '../db/keyset.js';
import { BadRequestError } from '../errors.js';
import { expandedTag, expandOf, expandParameter, type Expandable } from '../http/expand.js';
import { isExportFormat, MEDIA_TYPES } from '../http/negotiate.js';
import type { FieldSelection } from '../http/fields.js';
import type { Page } from '../http/paging.js';
import { sendTagged } from '../http/records.js';
import { header } from '../http/schemas.js';

/**
 * What the operations of a collection (collection.ts) and the stock ledger's list do with
 * `expand=` (docs/reading.md "Related records in one call"), whatever the resource: the parameter
 * in their query string, the scopes checked before anything is read, a page's records expanded
 * as each chunk is read, an export refused, and a record answered with the weak ETag of its
 * expanded representation. What may be expanded and how is the resource's (related-records.ts).
 *
 * What a list or read declares when it takes `expand=` (docs/reading.md "Related records in one
 * call"): the relations it may expand (http/expand.ts), the record and page as answered with them,
 * the check of the caller's scopes (before anything is read) and the expansion of records read.
 */
export interface Expansion<Row> {
  relations: Expandable;
  record: TSchema;
  page: TSchema;
  check: (paths: readonly string[], request: FastifyRequest) => void;
  expand: (db: Db, rows: Row[], paths: readonly string[], request: FastifyRequest) => Promise<Expanded<unknown>>;
}

/** Records with their expansions, and the versions of what was embedded (for an ETag). */
export interface Expanded<Row> {
  rows: Row[];
  embedded: string;
}

/** The query-string schema of an operation, with `expand` when it takes it. */
export function withExpand<Query extends TObject>(querystring: Query, relations: Expandable) {
  const expand = Type.Optional(expandParameter(relations));
  const properties = { ...querystring.properties, expand } as Query['properties'] & { expand: typeof expand };
  const { additionalProperties } = querystring as { additionalProperties?: boolean };
  return Type.Object(properties, { additionalProperties: additionalProperties ?? true });
}

/** The ETag of a read that takes expand=: another, weak tag for each expanded representation (http/expand.ts). */
export const EXPANDABLE_ETAG = {
  ETag: header(
    'strong entity tag of the record; with expand, a weak one (W/) of that representation, which If-None-Match takes and If-Match never does',
  ),
};

/** An export is every record, read in chunks: it embeds nothing (docs/reading.md). */
function refuseExpandedExport(request: FastifyRequest): void {
  if (!isExportFormat(request.format)) return;
  const detail = `is not taken by an export (${MEDIA_TYPES[request.format].data}): ask for a JSON or XML page to embed related records`;
  throw new BadRequestError(
    `Query parameter expand ${detail}.`,
    [{ in: 'query', pointer: '#/expand', detail }],
    'invalid-query',
  );
}

/**
 * The paths the request names, its scopes checked (403 before anything is read); undefined when
 * none. `fields` selects in the record's own members and is not combined with expand yet: 400.
 */
export function checkedPaths<Row>(
  request: FastifyRequest,
  expansion: Expansion<Row>,
  fields: FieldSelection | undefined,
): string[] | undefined {
  const paths = expandOf(request);
  if (paths && fields) {
    const detail = 'cannot be combined with fields yet: ask for the fields of the record, or for it expanded';
    throw new BadRequestError(
      `Query parameter expand ${detail}.`,
      [{ in: 'query', pointer: '#/expand', detail }],
      'invalid-query',
    );
  }
  if (paths) expansion.check(paths, request);
  return paths;
}

/** A list's read, with each page (or export chunk) expanded as the request asks; 400 for an export that asks. */
export function expandedList<Row>(
  db: Db,
  request: FastifyRequest,
  expansion: Expansion<Row> | undefined,
  list: (query: ListQuery) => Promise<Page<Row>>,
  fields: FieldSelection | undefined,
): (query: ListQuery) => Promise<Page<unknown>> {
  if (!expansion || !expandOf(request)) return list;
  refuseExpandedExport(request);
  const paths = checkedPaths(request, expansion, fields)!;
  return async (query) => {
    const found = await list(query);
    return { ...found, rows: (await expansion.expand(db, found.rows, paths, request)).rows };
  };
}

/** One record with its expansions, under the weak ETag of that representation (304 on its own tag only). */
export async function sendExpanded<Row extends { version: number }>(
  db: Db,
  request: FastifyRequest,
  reply: FastifyReply,
  expansion: Expansion<Row>,
  record: Row,
  paths: readonly string[],
) {
  const { rows, embedded } = await expansion.expand(db, [record], paths, request);
  return sendTagged(request, reply, rows[0], expandedTag(record.version, paths, embedded, request.format));
}
