import { createReadStream, type ReadStream } from 'node:fs';
import { parse as parseCsv, type CsvError } from 'csv-parse';
import secureJson from 'secure-json-parse';
import { findRefusedText } from '../../http/text.js';
import { recordFieldErrors } from '../../http/validation-errors.js';
import { recordValidator } from '../../http/validation.js';
import { columnNamed, readCsvHeader, readFirstLine, RecordBound } from './csv.js';
import type { CsvGroup, ImportTarget } from './target.js';
import type { RowError } from '../operations/operations.schema.js';

/**
 * The rows of an uploaded file, read from its spooled copy as a stream (never whole in memory),
 * each checked against the target's schema: a row is either a value ready to write or an error
 * (row, field, problem). CSV is read by csv-parse (the `csv` project), separated as its header row
 * is (engine/imports/csv.ts): a BOM is dropped, CRLF and LF may be mixed, a row with more cells than the
 * header is refused, and so is a record past MAX_RECORD_BYTES (cut off before the parser holds
 * it, engine/imports/csv.ts RecordBound); a quoted field that never closes ends the file (nothing after it
 * can be read). NDJSON is split into lines here: one JSON object a line, blank lines skipped.
 */

/** The longest record (a CSV row, an NDJSON line) rowi reads: a 10 MB field is refused, not buffered. */
export const MAX_RECORD_BYTES = 1_048_576;

export interface FileRow {
  row: number;
  value?: Record<string, unknown>;
  error?: RowError;
  /** The file cannot be read past this row: the error ends the import. */
  fatal?: boolean;
  /** The last row of the file this record spans (a CSV order's last line); `row` when absent. */
  through?: number;
}

export interface RowSource {
  /** Bytes of the file read so far. */
  bytesRead(): number;
  rows: AsyncGenerator<FileRow>;
}

export const MEDIA_TYPES = ['text/csv', 'application/x-ndjson'] as const;
export type ImportMediaType = (typeof MEDIA_TYPES)[number];

export function readRows(path: string, mediaType: ImportMediaType, target: ImportTarget): RowSource {
  let bytes = 0;
  const openFile = () => {
    const stream = createReadStream(path, { highWaterMark: 256 * 1024 });
    stream.on('data', (chunk) => (bytes += chunk.length));
    return stream;
  };
  const check = rowChecker(target);
  const rows = mediaType === 'text/csv' ? csvRows(path, openFile, target, check) : ndjsonRows(openFile(), check);
  return { bytesRead: () => bytes, rows };
}

/**
 * Checks a row's value against the target's schema. `locate` (a grouped CSV record) turns a JSON
 * Pointer into the CSV row and column it came from.
 */
type Check = (row: number, value: Record<string, unknown>, locate?: Locate) => FileRow;
type Locate = (pointer: string) => { row: number; field: string } | undefined;

/** Each target's validator, compiled on its first import and kept (compiling takes a while). */
const validators = new WeakMap<ImportTarget, ReturnType<typeof recordValidator>>();

function rowChecker(target: ImportTarget): Check {
  let validate = validators.get(target);
  if (validate === undefined) validators.set(target, (validate = recordValidator(target.schema)));
  return (row, value, locate) => {
    const refused = findRefusedText(value);
    if (refused !== undefined) {
      const at = locate?.(refused.pointer) ?? { row, field: fieldOf(refused.pointer) };
      return { row, error: { ...at, problem: 'malformed-row', detail: refused.detail } };
    }
    // A valid row, the common case, skips describing errors (what it allocates, a row each).
    const found = validate!(value);
    const errors = found.length === 0 ? [] : recordFieldErrors(found);
    if (errors.length === 0) return { row, value };
    const [first] = errors;
    const at = locate?.(first!.pointer) ?? { row, field: fieldOf(first!.pointer) };
    const detail = errors.map((error) => `${placeOf(error.pointer, locate)} ${error.detail}`).join('; ');
    return { row, error: { ...at, problem: 'validation-failed', detail } };
  };
}

/** The top member a JSON Pointer names (#/price → price); null for the row itself. */
function fieldOf(pointer: string): string | null {
  const [, first] = pointer.replace(/^#/, '').split('/');
  return first === undefined || first === '' ? null : unescapeToken(first);
}

/** Where a pointer is, in words: its path (lines/2/quantity), or the CSV row and column it came from. */
function placeOf(pointer: string, locate: Locate | undefined): string {
  const at = locate?.(pointer);
  if (at !== undefined) return `row ${at.row} ${at.field}`;
  const path = pointer.replace(/^#\/?/, '');
  return path === '' ? 'the row' : path.split('/').map(unescapeToken).join('/');
}

const unescapeToken = (token: string) => token.replace(/~1/g, '/').replace(/~0/g, '~');

async function* csvRows(
  path: string,
  openFile: () => ReadStream,
  target: ImportTarget,
  check: Check,
): AsyncGenerator<FileRow> {
  // The separator is the header row's (checked when the file was received): a comma, a semicolon or a tab.
  const delimiter = readCsvHeader(await readFirstLine(path), target)?.delimiter ?? ',';
  const parser = parseCsv({
    bom: true,
    delimiter,
    record_delimiter: ['\r\n', '\n'],
    relax_column_count: true,
    // RecordBound cuts a record off at MAX_RECORD_BYTES first; this is the parser's own bound, never met.
    max_record_size: 2 * MAX_RECORD_BYTES,
  });
  const bound = new RecordBound(delimiter, MAX_RECORD_BYTES);
  const stream = openFile();
  stream.pipe(bound).pipe(parser);
  stream.on('error', (error) => parser.destroy(error));
  let header: string[] | undefined;
  let row = 0;
  const group = target.csvGroup === undefined ? undefined : new RowGroup(target.csvGroup, check);
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      row++;
      const fault = bound.faults.get(row);
      if (fault === 'unclosed') {
        // A quoted field ran past the bound and never closed: the rest of the file was in it.
        if (group !== undefined) yield* group.end();
        yield { row, fatal: true, error: { row, field: null, problem: 'malformed-file', detail: UNCLOSED } };
        return;
      }
      if (header === undefined) {
        header = record.map((name) => columnNamed(target, name) ?? name.trim());
        continue;
      }
      if (record.length === 1 && record[0] === '' && fault === undefined) continue;
      const tooMany: RowError | undefined =
        fault === 'too-long'
          ? tooLong(row).error
          : record.length > header.length
            ? {
                row,
                field: null,
                problem: 'malformed-row',
                detail: `has ${record.length} fields; the header names ${header.length}`,
              }
            : undefined;
      const cells: Record<string, string> = {};
      for (let index = 0; index < header.length; index++) {
        const cell = record[index];
        if (cell !== undefined && cell !== '') cells[header[index]!] = cell;
      }
      if (group !== undefined) {
        yield* group.add(row, cells, tooMany);
        continue;
      }
      yield tooMany === undefined ? check(row, target.fromCsv(cells)) : { row, error: tooMany };
    }
    if (group !== undefined) yield* group.end();
  } catch (error) {
    const csv = error as CsvError;
    if (typeof csv.code !== 'string' || (!csv.code.startsWith('CSV_') && !csv.code.startsWith('INVALID_'))) throw error;
    // The record read so far is taken as it is: the file cannot tell whether it went on.
    if (group !== undefined) yield* group.end();
    row++;
    yield { row, fatal: true, error: { row, field: null, problem: 'malformed-file', detail: csvDetail(csv) } };
  } finally {
    // Read to its end, or given up on: its file is closed either way.
    stream.destroy();
  }
}

/**
 * The rows of a CSV record that spans several (an order: a row a line, target.csvGroup), gathered
 * while they are consecutive and name the same record; each record is one FileRow numbered by its
 * first row, spanning to its last (`through`). A refused row refuses its record.
 */
class RowGroup {
  #key: string | undefined;
  #rows: { row: number; cells: Record<string, string> }[] = [];
  #first = 0;
  #last = 0;
  #refused: RowError | undefined;

  constructor(
    readonly spec: CsvGroup,
    readonly check: Check,
  ) {}

  *add(row: number, cells: Record<string, string>, refused: RowError | undefined): Generator<FileRow> {
    const key = cells[this.spec.by];
    if (key === undefined || key !== this.#key) yield* this.end();
    if (key === undefined) {
      yield {
        row,
        error: refused ?? {
          row,
          field: this.spec.by,
          problem: 'validation-failed',
          detail: `${this.spec.by} is empty; every row names its record`,
        },
      };
      return;
    }
    if (this.#key === undefined) {
      this.#key = key;
      this.#first = row;
    }
    this.#last = row;
    if (this.#refused !== undefined) return;
    if (refused !== undefined) this.#refused = refused;
    else if (this.#rows.length >= this.spec.max) {
      this.#refused = {
        row,
        field: this.spec.by,
        problem: 'validation-failed',
        detail: `${this.spec.by} ${key} has more than ${this.spec.max} rows`,
      };
      this.#rows = [];
    } else this.#rows.push({ row, cells });
  }

  *end(): Generator<FileRow> {
    if (this.#key === undefined) return;
    const [row, through, rows, refused] = [this.#first, this.#last, this.#rows, this.#refused];
    this.#key = undefined;
    this.#rows = [];
    this.#refused = undefined;
    if (refused !== undefined) {
      yield { row, through, error: refused };
      return;
    }
    const made = this.spec.fromCsvRows(rows.map((entry) => entry.cells));
    if (!('value' in made)) {
      yield { row, through, error: { row, field: made.field, problem: 'validation-failed', detail: made.detail } };
      return;
    }
    const member = `#/${this.spec.member}/`;
    const locate: Locate = (pointer) => {
      if (!pointer.startsWith(member)) return undefined;
      const [index = '', field = this.spec.member] = pointer.slice(member.length).split('/');
      const entry = rows[Number(index)];
      return entry === undefined ? undefined : { row: entry.row, field: unescapeToken(field) };
    };
    yield { ...this.check(row, made.value, locate), through };
  }
}

const UNCLOSED = 'a quoted field opens here and never closes; the file cannot be read past it';

function csvDetail(error: CsvError): string {
  switch (error.code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      return UNCLOSED;
    case 'CSV_MAX_RECORD_SIZE':
      return `a row longer than ${MAX_RECORD_BYTES} bytes (a field that large is refused); the file cannot be read past it`;
    default:
      return `the CSV cannot be read here (${error.message}); the file cannot be read past it`;
  }
}

async function* ndjsonRows(stream: NodeJS.ReadableStream, check: Check): AsyncGenerator<FileRow> {
  let row = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  /** Past MAX_RECORD_BYTES: the rest of the line is dropped, and the row refused. */
  let overlong = false;
  let first = true;
  const line = (bytes: Buffer): FileRow | undefined => {
    row++;
    let text = bytes.toString('utf8');
    if (first) {
      first = false;
      if (text.startsWith('\uFEFF')) text = text.slice(1);
    }
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (text.trim() === '') return undefined;
    return parseLine(row, text, check);
  };
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, end);
      start = end + 1;
      if (overlong) {
        overlong = false;
        pending = [];
        pendingBytes = 0;
        row++;
        yield tooLong(row);
        continue;
      }
      const whole = pending.length === 0 ? piece : Buffer.concat([...pending, piece]);
      pending = [];
      pendingBytes = 0;
      if (whole.length > MAX_RECORD_BYTES) {
        row++;
        yield tooLong(row);
        continue;
      }
      const parsed = line(whole);
      if (parsed !== undefined) yield parsed;
    }
    const rest = chunk.subarray(start);
    if (rest.length > 0 && !overlong) {
      pendingBytes += rest.length;
      if (pendingBytes > MAX_RECORD_BYTES) {
        overlong = true;
        pending = [];
      } else pending.push(Buffer.from(rest));
    }
  }
  if (overlong) {
    row++;
    yield tooLong(row);
  } else if (pending.length > 0) {
    const parsed = line(Buffer.concat(pending));
    if (parsed !== undefined) yield parsed;
  }
}

const tooLong = (row: number): FileRow & { error: RowError } => ({
  row,
  error: { row, field: null, problem: 'malformed-row', detail: `is longer than ${MAX_RECORD_BYTES} bytes` },
});

function parseLine(row: number, text: string, check: Check): FileRow {
  let value: unknown;
  try {
    value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    return {
      row,
      error: { row, field: null, problem: 'malformed-row', detail: `is not JSON: ${(error as Error).message}` },
    };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const what = Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`;
    return {
      row,
      error: {
        row,
        field: null,
        problem: 'malformed-row',
        detail: `is ${what}, not a JSON object (one record a line)`,
      },
    };
  }
  return check(row, value as Record<string, unknown>);
}
