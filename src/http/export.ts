import { Readable } from 'node:stream';
import { setImmediate } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type, { type TSchema } from 'typebox';
import type { Config } from '../config/config.js';
import type { ListQuery } from '../db/keyset.js';
import { AppError } from '../errors.js';
import { csvLayout, csvText, jsonWriter, keepColumns, type CsvLayout } from './export-shapes.js';
import type { FieldSelection } from './fields.js';
import { isExportFormat, MEDIA_TYPES, type ExportFormat } from './negotiate.js';
import { sendPage, type Page } from './paging.js';
import { header } from './schemas.js';

/**
 * Exports (docs/reading.md): a collection's list asked for as `text/csv` or
 * `application/x-ndjson` answers the whole filtered, sorted collection, not a page, streamed.
 *
 * It is read in chunks by keyset (the list's own query, so its filters, sort and the caller's
 * sight are the same): each chunk is one short read of its own, never a transaction spanning
 * two, so an export holds no lock and no snapshot between chunks, and on SQLite never keeps a
 * read open that would stop the WAL checkpoint. The next chunk is read only when the client has
 * taken the last one (the stream's backpressure), so memory stays at about a chunk whatever the
 * size; a client that takes none for ROWI_EXPORT_STALL_TIMEOUT is cut off. Its size is checked
 * upfront: one read of the row past ROWI_EXPORT_MAX_ROWS; when there is one, 422
 * export-too-large before anything is sent.
 *
 * Once the first byte is sent the status is 200; a failure later (the database gone) ends the
 * response without its last chunk (the connection is reset), which every HTTP client reports as
 * an incomplete transfer, never as a complete export.
 */
/**
 * Rows per chunk. The read of a chunk runs without a pause (its text pauses after EXPORT_SLICE_MS),
 * so a request that comes in meanwhile waits for it: 500 orders with their lines take about 3 ms
 * to read on SQLite and as much again to write (bench/exports.mjs), which keeps that wait short,
 * while 250 paid the per-chunk costs (two queries, a turn of the event loop) twice as often.
 */
export const EXPORT_CHUNK_ROWS = 500;

/**
 * Rows written into one piece of text. A chunk's text in one string (160 KB for 500 orders in
 * NDJSON) is past V8's largest regular object (128 KB) and goes to its large-object space, which
 * only a full collection frees: an export of 1,000,000 orders grew rowi's RSS by 90 MB that way.
 * Pieces of 100 records (about 32 KB) are freed by the young generation's collections.
 */
const EXPORT_PIECE_ROWS = 100;

/**
 * How long a chunk's text may be written without a turn of the event loop for other requests. The
 * pieces of a chunk are written one after another while the client takes them (a loopback socket
 * takes each at once), so on a slow or loaded machine a request waited for a whole chunk's text:
 * past this, the next piece waits for a turn.
 */
const EXPORT_SLICE_MS = 4;

/** What a collection's list needs to answer as a page or as an export. */
export interface Listing<Row> {
  /** The file name's stem (`orders` → orders.csv). */
  name: string;
  /** The schema of a record as the list answers it (what CSV's columns and NDJSON's members come from). */
  record: TSchema;
  query: ListQuery;
  /** The list's read: one short read of the page the query asks for. */
  list: (query: ListQuery) => Promise<Page<Row>>;
  /** Only these fields of each record (`fields`), in every representation. */
  fields?: FieldSelection | undefined;
}

export type ExportLimits = Pick<Config, 'exportMaxRows' | 'exportStallTimeout'>;

/** Answers a list: a page in JSON or XML, or the whole collection as an export. */
export async function answerList<Row>(
  request: FastifyRequest,
  reply: FastifyReply,
  listing: Listing<Row>,
  limits: ExportLimits,
) {
  if (isExportFormat(request.format)) return sendExport(request, reply, listing, request.format, limits);
  return sendPage(request, reply, await listing.list(listing.query), listing.query, listing.fields);
}

interface Shapes {
  csv: CsvLayout;
  /** A record as CSV's columns take it: the record itself, or only the fields asked for. */
  project: ((row: unknown) => unknown) | undefined;
  /** A record's line of NDJSON, without its line feed. */
  json: (row: unknown) => string;
}
const layouts = new WeakMap<TSchema, Shapes>();
// By record schema (a record with expansions has its own), by field set.
const selectedLayouts = new WeakMap<TSchema, WeakMap<FieldSelection, Shapes>>();

/** The columns and the members an export writes: the record's, or those of the fields asked for. */
function shapesOf(record: TSchema, fields: FieldSelection | undefined): Shapes {
  let shapes = layouts.get(record);
  if (!shapes) {
    shapes = { csv: csvLayout(record), project: undefined, json: jsonWriter(record) };
    layouts.set(record, shapes);
  }
  if (!fields) return shapes;
  let ofRecord = selectedLayouts.get(record);
  if (!ofRecord) selectedLayouts.set(record, (ofRecord = new WeakMap()));
  let selected = ofRecord.get(fields);
  if (!selected) {
    const { pick } = fields;
    selected = {
      csv: keepColumns(shapes.csv, fields.selects),
      project: pick,
      json: (row) => JSON.stringify(pick(row)),
    };
    ofRecord.set(fields, selected);
  }
  return selected;
}

async function sendExport<Row>(
  request: FastifyRequest,
  reply: FastifyReply,
  listing: Listing<Row>,
  format: ExportFormat,
  limits: ExportLimits,
) {
  const { query } = listing;
  const past = await listing.list({ ...query, limit: 1, offset: limits.exportMaxRows });
  if (past.rows.length > 0) {
    throw new AppError(
      'export-too-large',
      `This export would hold more than ${limits.exportMaxRows} records (ROWI_EXPORT_MAX_ROWS); narrow it with filters and export in parts.`,
      { extensions: { max_rows: limits.exportMaxRows } },
    );
  }
  reply
    .type(format === 'csv' ? `${MEDIA_TYPES.csv.data}; charset=utf-8; header=present` : MEDIA_TYPES.ndjson.data)
    .header('content-disposition', `attachment; filename="${listing.name}.${format}"`)
    .header('cache-control', 'no-store');
  if (request.method === 'HEAD') return sendHeadOfStream(reply);
  const shapes = shapesOf(listing.record, listing.fields);
  const { project, json } = shapes;
  const write =
    format === 'csv'
      ? (rows: Row[], first: boolean) => csvText(shapes.csv, project ? rows.map(project) : rows, first)
      : (rows: Row[]) => {
          let text = '';
          for (const row of rows) text += `${json(row)}\n`;
          return text;
        };
  const stream = Readable.from(
    chunks(listing, write, limits, () => stream.destroy(stalled(limits))),
    {
      objectMode: false,
      highWaterMark: 64 * 1024,
    },
  );
  stream.on('error', (error) => {
    request.log.warn({ err: error }, 'export ended before its last chunk');
    reply.raw.destroy();
  });
  return reply.send(stream);
}

/**
 * HEAD of a body that GET streams: GET's headers without a Content-Length, which is not known
 * before the body is written (an empty body would be answered `Content-Length: 0`, a wrong one:
 * RFC 9110 §9.3.2 lets HEAD leave out what only the content determines, never state it wrongly).
 * Nothing is read: an empty stream ends the answer, and Node frames a HEAD without a body.
 */
export function sendHeadOfStream(reply: FastifyReply) {
  return reply.send(Readable.from([]));
}

function stalled(limits: ExportLimits): Error {
  return new Error(`the client took no chunk for ${limits.exportStallTimeout} ms (ROWI_EXPORT_STALL_TIMEOUT)`);
}

/**
 * The export's text, a chunk at a time: each chunk one read of the list after the last row of
 * the one before. While a chunk waits for the client to take it, a timer runs; when it fires
 * first, `stall` ends the stream (and the generator, which holds nothing but its position).
 *
 * The next chunk is not read ahead, on PostgreSQL either: there it made an export 1.10–1.14×
 * faster but halved the turns left to other requests (the p99 of reads alongside 14–18 ms → 21–28
 * ms, past its 25 ms goal; docs/performance.md).
 */
async function* chunks<Row>(
  listing: Listing<Row>,
  write: (rows: Row[], first: boolean) => string,
  limits: ExportLimits,
  stall: () => void,
): AsyncGenerator<string> {
  let after = listing.query.after;
  let left = limits.exportMaxRows;
  let first = true;
  for (;;) {
    // Other requests are served before each read and before each chunk's text is written, whether
    // the client reads fast or not (a SQLite read resolves at once; a client that always takes the
    // next chunk would hold the loop): a request waits for one of the two at most, not for both.
    await setImmediate();
    const page = await listing.list({ ...listing.query, limit: Math.min(EXPORT_CHUNK_ROWS, left), after });
    left -= page.rows.length;
    await setImmediate();
    let turnAt = performance.now();
    // Rows added while the export ran may take it past its cap: it ends unfinished then, not cut short silently.
    if (left === 0 && page.nextAfter) throw new Error('the export grew past ROWI_EXPORT_MAX_ROWS while it ran');
    const { rows } = page;
    for (let start = 0; start < rows.length || first; start += EXPORT_PIECE_ROWS) {
      if (performance.now() - turnAt >= EXPORT_SLICE_MS) {
        await setImmediate();
        turnAt = performance.now();
      }
      const text = write(
        start === 0 && rows.length <= EXPORT_PIECE_ROWS ? rows : rows.slice(start, start + EXPORT_PIECE_ROWS),
        first,
      );
      first = false;
      const timer = setTimeout(stall, limits.exportStallTimeout);
      try {
        if (text !== '') yield text;
      } finally {
        clearTimeout(timer);
      }
    }
    if (!page.nextAfter) return;
    after = page.nextAfter;
  }
}

/**
 * The 200 response of a list that also exports: its representation (the page in JSON and XML)
 * and the whole collection in CSV and NDJSON (each line one record as a page's data holds it).
 */
export function withExports<Response extends { description: string; headers: object; content: object }>(
  response: Response,
  record: TSchema,
) {
  return {
    ...response,
    description: `${response.description}; as text/csv or application/x-ndjson, every record the filters select, in the order asked for (docs/reading.md)`,
    headers: {
      ...response.headers,
      'Content-Disposition': header('only on an export: attachment; filename="<collection>.csv" (or .ndjson)'),
    },
    content: {
      ...response.content,
      [MEDIA_TYPES.csv.data]: {
        schema: Type.String({
          description:
            "RFC 4180, UTF-8, a header row of the fields (nested ones dotted: lines.quantity; an embedded record's too: user.email, lines.item.name); an order has a row per line; text a spreadsheet would run as a formula starts with a single quote",
        }),
      },
      [MEDIA_TYPES.ndjson.data]: { schema: record },
    },
  };
}
