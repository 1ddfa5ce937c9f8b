import type { FastifyReply, FastifyRequest } from 'fastify';
import Type, { type TObject, type TSchema } from 'typebox';
import type { Db } from '../../db/database.js';
import { BadRequestError } from '../../errors.js';
import { expandedSchema, expandedTag, expandOf, expandParameter, expands, type Expandable } from '../../http/expand.js';
import type { Listing } from '../../http/export.js';
import type { FieldSelection, Selectable } from '../../http/fields.js';
import { sendTagged } from '../../http/records.js';
import { header } from '../../http/schemas.js';

/**
 * What the operations of a collection (engine/collection.ts) and the stock ledger's list do with
 * `expand=` (docs/reading.md "Related records in one call"), whatever the resource: the parameter
 * in their query string, the scopes checked before anything is read, the fields that may name
 * what is embedded, a page's (or an export's chunk's) records expanded as each is read, and a
 * record answered with the weak ETag of its expanded representation. What may be expanded and
 * how is the resource's (api/related-records.ts).
 *
 * What a list or read declares when it takes `expand=` (docs/reading.md "Related records in one
 * call"): the relations it may expand (http/expand.ts), the record and page as answered with them,
 * the check of the caller's scopes (before anything is read) and the expansion of records read.
 */
export interface Expansion<Row> {
  relations: Expandable;
  record: TSchema;
  page: TSchema;
  /** What `fields` selects in: the expanded record, names in what it embeds taken only when expanded. */
  selectable: Selectable;
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
  // Closed, as every route's query string is (http/query-parameters.ts).
  return Type.Object(properties, { additionalProperties: false });
}

/** The ETag of a read that takes expand=: another, weak tag for each expanded representation (http/expand.ts). */
export const EXPANDABLE_ETAG = {
  ETag: header(
    'strong entity tag of the record; with expand, a weak one (W/) of that representation, which If-None-Match takes and If-Match never does',
  ),
};

/**
 * The paths the request names, its scopes checked (403 before anything is read); undefined when
 * none. A field inside a related record that the request does not expand is 400 naming it.
 */
export function checkedPaths<Row>(
  request: FastifyRequest,
  expansion: Expansion<Row>,
  fields: FieldSelection | undefined,
): string[] | undefined {
  const paths = expandOf(request);
  for (const { path, name } of fields?.reaches ?? []) {
    if (paths && expands(paths, path)) continue;
    const detail = `names ${name}, inside ${path}, which is not expanded: add expand=${path} (or leave ${name} out)`;
    throw new BadRequestError(
      `Query parameter fields ${detail}.`,
      [{ in: 'query', pointer: '#/fields', detail }],
      'invalid-query',
    );
  }
  if (paths) expansion.check(paths, request);
  return paths;
}

/**
 * A list's listing with each page, or each chunk of an export, expanded as the request asks: one
 * query per related resource and chunk (http/export.ts reads an export in chunks, so what it holds
 * does not grow with its size); an export's columns and lines are those of the record with what it
 * embeds (expandedSchema). As it is without expand.
 */
export function expandedListing<Row>(
  db: Db,
  request: FastifyRequest,
  expansion: Expansion<Row>,
  listing: Listing<Row>,
): Listing<unknown> {
  const paths = checkedPaths(request, expansion, listing.fields);
  if (!paths) return listing;
  const { list } = listing;
  return {
    ...listing,
    record: expandedSchema(expansion.record, expansion.relations, paths),
    list: async (query) => {
      const found = await list(query);
      return { ...found, rows: (await expansion.expand(db, found.rows, paths, request)).rows };
    },
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
  fields: FieldSelection | undefined,
) {
  const { rows, embedded } = await expansion.expand(db, [record], paths, request);
  const etag = expandedTag(record.version, paths, embedded, request.format, fields?.tag);
  return sendTagged(request, reply, rows[0], etag, 200, fields);
}
