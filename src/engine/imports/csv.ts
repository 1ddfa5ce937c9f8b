import { open } from 'node:fs/promises';
import { Transform, type TransformCallback } from 'node:stream';
import { parse as parseCsv } from 'csv-parse/sync';
import type { ImportTarget } from './target.js';

/**
 * CSV files as spreadsheets write them (docs/bulk.md "Imports"): the header row's names match the
 * target's columns without regard to case and surrounding spaces (`SKU, Quantity`), and the
 * separator is the one of the header row, a comma, a semicolon (Excel's in locales whose decimal
 * mark is a comma) or a tab; and a record past the longest rowi reads is cut off here, before the
 * parser holds it, so that it refuses its row and reading goes on.
 */

/** The separators a header row may use; on a tie (a header of one column), the first. */
export const CSV_DELIMITERS = [',', ';', '\t'] as const;
export type CsvDelimiter = (typeof CSV_DELIMITERS)[number];

/** The most of a file's first line read to find its header row. */
export const HEADER_BYTES = 64 * 1024;

export interface CsvHeader {
  delimiter: CsvDelimiter;
  /** The header's cells, trimmed, as written. */
  cells: string[];
  /** The target's column each cell names (undefined: none). */
  columns: (string | undefined)[];
}

/** The column of `target` a header cell names, without regard to case and surrounding spaces. */
export function columnNamed(target: ImportTarget, cell: string): string | undefined {
  const wanted = cell.trim().toLowerCase();
  return target.columns.find((column) => column.toLowerCase() === wanted);
}

/**
 * The header row `line` (a BOM and a CR at its end dropped), split by the separator with which it
 * names the most of the target's columns; undefined when it cannot be read as CSV at all.
 */
export function readCsvHeader(line: string, target: ImportTarget): CsvHeader | undefined {
  const text = line.replace(/^\uFEFF/, '').replace(/\r$/, '');
  let best: CsvHeader | undefined;
  let bestCount = -1;
  for (const delimiter of CSV_DELIMITERS) {
    let cells: string[];
    try {
      cells = ((parseCsv(text, { relax_quotes: true, delimiter }) as string[][])[0] ?? []).map((cell) => cell.trim());
    } catch {
      continue;
    }
    const columns = cells.map((cell) => columnNamed(target, cell));
    const count = columns.filter((column) => column !== undefined).length;
    if (count > bestCount) [best, bestCount] = [{ delimiter, cells, columns }, count];
  }
  return best;
}

/** Separators some programs write that rowi does not read, named when a header row uses one. */
const OTHER_SEPARATORS = ['|', ':', ' ', '^', '~', '#'];

/** The separator of a header row that names columns only when split by one rowi does not read (`sku|name`). */
export function otherSeparator(line: string, target: ImportTarget): string | undefined {
  return OTHER_SEPARATORS.find((separator) =>
    line.split(separator).some((cell) => columnNamed(target, cell.replace(/^"|"$/g, '')) !== undefined),
  );
}

/** The first line of a file (at most HEADER_BYTES of it), without its line feed. */
export async function readFirstLine(path: string): Promise<string> {
  const file = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(HEADER_BYTES);
    const { bytesRead } = await file.read(buffer, 0, HEADER_BYTES, 0);
    const end = buffer.subarray(0, bytesRead).indexOf(10);
    return buffer.subarray(0, end === -1 ? bytesRead : end).toString('utf8');
  } finally {
    await file.close();
  }
}

/** What RecordBound found of a record: longer than the bound, or its quoted field never closed (the file's end). */
export type RecordFault = 'too-long' | 'unclosed';

const QUOTE = 0x22;
const LINE_FEED = 0x0a;
const BOM = [0xef, 0xbb, 0xbf];

/**
 * Passes a CSV file's bytes to the parser, except past `maxBytes` of one record (its line feed not
 * counted): the rest of that
 * record is dropped (a quoted field it was in closed first), and the record noted, by its number
 * from 1 (the header's), as `too-long`; one whose quoted field runs to the file's end as
 * `unclosed`. So a 10 MB field is never held, and the parser reads the record's first part as a
 * whole record and goes on with the next. Records end at a line feed outside quotes, as the
 * parser ends them (CRLF or LF); a quote opens a field only at its start (RFC 4180), and `""` in a
 * quoted field is a quote. Bytes are looked at one by one, but only ASCII ones decide, and no byte
 * of a multi-byte UTF-8 character is ASCII.
 */
export class RecordBound extends Transform {
  readonly faults = new Map<number, RecordFault>();
  readonly #delimiter: number;
  readonly #maxBytes: number;
  #record = 1;
  #recordBytes = 0;
  #quoted = false;
  /** In a quoted field, the last byte was a quote: it closes the field, or a second one follows. */
  #quoteSeen = false;
  #fieldStart = true;
  #dropping = false;
  /** The bytes of a BOM met at the file's start so far (BOM.length once past it). */
  #bomBytes = 0;

  constructor(delimiter: CsvDelimiter, maxBytes: number) {
    super();
    this.#delimiter = delimiter.charCodeAt(0);
    this.#maxBytes = maxBytes;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let start = 0;
    for (let at = 0; at < chunk.length; at++) {
      // A BOM before the header is no part of its first field (the parser drops it).
      if (this.#bomBytes < BOM.length) {
        if (chunk[at] === BOM[this.#bomBytes]) {
          this.#bomBytes++;
          continue;
        }
        this.#bomBytes = BOM.length;
      }
      // Whether the parser, given the bytes before this one, is inside a quoted field still open.
      const open = this.#quoted && !this.#quoteSeen;
      if (this.#ends(chunk[at]!)) {
        if (this.#dropping) {
          this.#dropping = false;
          start = at;
        }
        this.#record++;
        this.#recordBytes = 0;
      } else if (this.#dropping) start = at + 1;
      else if (++this.#recordBytes > this.#maxBytes) {
        this.#dropping = true;
        this.faults.set(this.#record, 'too-long');
        if (at > start) this.push(chunk.subarray(start, at));
        if (open) this.push('"');
        start = at + 1;
      }
    }
    if (start < chunk.length) this.push(chunk.subarray(start));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.#dropping && this.#quoted && !this.#quoteSeen) this.faults.set(this.#record, 'unclosed');
    done();
  }

  /** Follows the quoting with one more byte: whether it ends the record. */
  #ends(byte: number): boolean {
    if (this.#quoted) {
      if (!this.#quoteSeen) {
        if (byte === QUOTE) this.#quoteSeen = true;
        return false;
      }
      this.#quoteSeen = false;
      if (byte === QUOTE) return false;
      this.#quoted = false;
    }
    if (byte === LINE_FEED) {
      this.#fieldStart = true;
      return true;
    }
    if (byte === QUOTE && this.#fieldStart) this.#quoted = true;
    this.#fieldStart = byte === this.#delimiter;
    return false;
  }
}
