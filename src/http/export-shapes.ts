import { stringify } from 'csv-stringify/sync';
import type { TSchema } from 'typebox';
import { guardFormula } from './csv-formulas.js';

/**
 * What an exported record looks like, derived from the schema of the record a list answers (so
 * the columns follow the schema, whatever the stored row holds beside it: its version, its owner).
 *
 * CSV (docs/reading.md "CSV"): a column per field, in the schema's order; an object's fields as
 * dotted columns (`user.name`), the objects inside it likewise (an embedded record's: `user.email`,
 * `lines.item.stock.quantity`); the first array of objects met (an order's lines; a movement's
 * embedded order's lines) spread over rows: a row per element with the record's other fields
 * repeated and the element's as dotted columns (`lines.item_id`), one row with those cells empty
 * when the array is empty or absent. Any other structure (a free-form object, an array of values,
 * a second array of objects) is one cell of JSON text. null is an empty cell, booleans are true
 * and false. Text that a spreadsheet would run as a formula starts with a single quote, as OWASP
 * recommends for CSV injection (guardFormula); numbers are written as numbers (-5 stays -5).
 */
export interface CsvLayout {
  columns: CsvColumn[];
  /** The path of the array of objects spread over rows, if any. */
  spread: readonly string[] | undefined;
}

export interface CsvColumn {
  /** The header: the path, dotted. */
  name: string;
  /** The members from the record down to the value (through the spread array's element, unnamed). */
  path: readonly string[];
  /** A structure written as JSON text. */
  json: boolean;
}

export interface Shape {
  type?: string | string[];
  properties?: Record<string, Shape>;
  items?: Shape;
  anyOf?: Shape[];
}

/** The object or array branch of a nullable member, or the member itself. */
export function structureOf(schema: Shape): Shape {
  const branch = schema.anyOf?.find((choice) => choice.type === 'object' || choice.type === 'array');
  return branch ?? schema;
}

const isStructure = (schema: Shape) =>
  schema.type === 'object' ||
  schema.type === 'array' ||
  schema.anyOf?.some((choice) => choice.type === 'object' || choice.type === 'array') === true;

/** The members of an object with named members, of the object branch of a nullable one; undefined otherwise. */
function namedMembers(schema: Shape): Record<string, Shape> | undefined {
  const shape = structureOf(schema);
  return shape.type === 'object' && shape.properties && Object.keys(shape.properties).length > 0
    ? shape.properties
    : undefined;
}

export function csvLayout(record: TSchema): CsvLayout {
  const columns: CsvColumn[] = [];
  let spread: string[] | undefined;
  const walk = (members: Record<string, Shape>, prefix: string[]) => {
    for (const [name, raw] of Object.entries(members)) {
      const path = [...prefix, name];
      const shape = structureOf(raw);
      const inner = namedMembers(raw);
      const elements = shape.type === 'array' && shape.items ? namedMembers(shape.items) : undefined;
      if (inner) walk(inner, path);
      else if (elements && spread === undefined) {
        spread = path;
        walk(elements, path);
      } else columns.push({ name: path.join('.'), path, json: isStructure(raw) });
    }
  };
  walk((record as Shape).properties ?? {}, []);
  return { columns, spread };
}

/** The columns of a layout that `keep` keeps; the array spread over rows only while one of its columns is kept. */
export function keepColumns(layout: CsvLayout, keep: (column: CsvColumn) => boolean): CsvLayout {
  const columns = layout.columns.filter(keep);
  const { spread } = layout;
  const spreads = spread !== undefined && columns.some((column) => under(column.path, spread));
  return { columns, spread: spreads ? spread : undefined };
}

const under = (path: readonly string[], prefix: readonly string[]) =>
  path.length > prefix.length && prefix.every((segment, index) => path[index] === segment);

type Cell = string | number | null;

function cellOf(value: unknown, json: boolean): Cell {
  if (value === null || value === undefined) return null;
  if (json) return guardFormula(JSON.stringify(value));
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return typeof value === 'string' ? guardFormula(value) : (value as number);
}

const CSV_OPTIONS = {
  // guardFormula guards every cell (csv-stringify's guard looks at the first character only).
  escape_formulas: false,
  record_delimiter: '\r\n',
  // A lone line feed or carriage return in a field is quoted too, not only the record delimiter:
  // unquoted, it would split the record for any reader.
  quote_record_delimiter: true,
} as const;

/** CSV_OPTIONS but for a one-character record delimiter, which csvText turns into CRLF (see there). */
const CSV_PARTS_OPTIONS = { ...CSV_OPTIONS, record_delimiter: '\n' } as const;

/** The value at `path` from `value`, undefined when something on the way is missing. */
function valueAt(value: unknown, path: readonly string[], from: number): unknown {
  let at = value;
  for (let index = from; index < path.length && at !== null && at !== undefined; index++)
    at = (at as Record<string, unknown>)[path[index]!];
  return at;
}

/**
 * How a column is read, worked out once per layout: from the record or from the spread array's
 * element, then one or two members down (deeper paths, rare, by valueAt). An export reads millions
 * of cells: a loop over each path cost a tenth of a CSV export's time.
 */
interface ColumnReader {
  fromElement: boolean;
  first: string;
  second: string | undefined;
  /** Where the rest of the path starts, when it goes deeper than two members; 0 when not. */
  deeper: number;
  path: readonly string[];
  json: boolean;
}
const readersOf = new WeakMap<CsvLayout, ColumnReader[]>();

function readers(layout: CsvLayout): ColumnReader[] {
  let found = readersOf.get(layout);
  if (!found) {
    const { spread } = layout;
    found = layout.columns.map((column) => {
      const fromElement = spread !== undefined && under(column.path, spread);
      const start = fromElement ? spread.length : 0;
      const { path } = column;
      return {
        fromElement,
        first: path[start]!,
        second: path[start + 1],
        deeper: path.length > start + 2 ? start + 2 : 0,
        path,
        json: column.json,
      };
    });
    readersOf.set(layout, found);
  }
  return found;
}

/** The cell a reader reads from the record or from the spread array's element. */
function cellAt(reader: ColumnReader, holder: Record<string, unknown> | null | undefined): Cell {
  let value = holder === null || holder === undefined ? undefined : holder[reader.first];
  if (reader.second !== undefined && value !== null && value !== undefined)
    value = (value as Record<string, unknown>)[reader.second];
  if (reader.deeper > 0) value = valueAt(value, reader.path, reader.deeper);
  return cellOf(value, reader.json);
}

/**
 * The CSV rows of a chunk of records, with the header row first when `header`; each row ends with CRLF.
 *
 * csv-stringify's cost is per cell and per record (docs/performance.md), and a record with a
 * spread array repeats its own cells on the row of each element: an order of 2 lines is 24 cells,
 * 8 of them twice. So csv-stringify is given each exported record once, as one record of its own
 * cells (the columns before the spread's, then those after) followed by each element's cells,
 * records ended by a line feed; its text is then cut at the line feeds and the commas, by the
 * count of cells of each part, and each row put together as own cells, the element's, own cells
 * after. That is exact only where no cell was quoted: a field holding a comma is quoted, and one
 * holding a line feed or a carriage return too (quote_record_delimiter), so in a text without a
 * double quote every line feed ends a record and every comma a cell. A text with one (a cell
 * with a comma, a quote, a line break) is written again row by row (csvRowsText), a rare chunk.
 * The one-character delimiter saves csv-stringify a test that builds a string per cell, too.
 */
export function csvText(layout: CsvLayout, records: readonly unknown[], header: boolean): string {
  return csvPartsText(layout, records, header) ?? csvRowsText(layout, records, header);
}

/** Where each of a layout's columns is read from, by the index of the column. */
function columnsOf(layout: CsvLayout) {
  const columnReaders = readers(layout);
  const ofRecord: number[] = [];
  const ofElement: number[] = [];
  for (let index = 0; index < columnReaders.length; index++)
    (columnReaders[index]!.fromElement ? ofElement : ofRecord).push(index);
  return { columnReaders, ofRecord, ofElement };
}

/** The elements of the spread array of `record` that get a row each; undefined for one row with their cells empty. */
function elementsOf(layout: CsvLayout, record: unknown): unknown[] | undefined {
  const found = layout.spread === undefined ? undefined : valueAt(record, layout.spread, 0);
  return Array.isArray(found) && found.length > 0 ? (found as unknown[]) : undefined;
}

/** csvText from csv-stringify's text of the parts of each row (see csvText); undefined when a cell was quoted. */
function csvPartsText(layout: CsvLayout, records: readonly unknown[], header: boolean): string | undefined {
  const { columnReaders, ofRecord, ofElement } = columnsOf(layout);
  const parts: Cell[][] = [];
  if (header) parts.push(layout.columns.map((column) => column.name));
  if (ofElement.length === 0) {
    for (const record of records)
      parts.push(ofRecord.map((index) => cellAt(columnReaders[index]!, record as Record<string, unknown>)));
    const text = stringify(parts, CSV_PARTS_OPTIONS);
    return text.includes('"') ? undefined : text.replaceAll('\n', '\r\n');
  }
  // One record of csv-stringify's per exported record (see csvText): a record of its own for each
  // part (own cells before, after, each element's) cost the writer 1.14× the CPU.
  const firstOfElement = ofElement[0]!;
  const before = ofRecord.filter((index) => index < firstOfElement);
  const after = ofRecord.filter((index) => index > firstOfElement);
  const own = ofRecord.length;
  const width = ofElement.length;
  const counts = new Array<number>(records.length);
  for (let at = 0; at < records.length; at++) {
    const record = records[at] as Record<string, unknown>;
    const elements = elementsOf(layout, record);
    const count = elements ? elements.length : 0;
    counts[at] = count;
    const cells = new Array<Cell>(own + count * width);
    for (let index = 0; index < own; index++) cells[index] = cellAt(columnReaders[ofRecord[index]!]!, record);
    for (let element = 0; element < count; element++) {
      const holder = elements![element] as Record<string, unknown>;
      const offset = own + element * width;
      for (let index = 0; index < width; index++)
        cells[offset + index] = cellAt(columnReaders[ofElement[index]!]!, holder);
    }
    parts.push(cells);
  }
  const text = stringify(parts, CSV_PARTS_OPTIONS);
  // Without a quote no cell was quoted: every line feed ends a record and every comma a cell.
  if (text.includes('"')) return undefined;
  let rows = '';
  let start = 0;
  if (header) {
    const end = text.indexOf('\n');
    rows = `${end === -1 ? text : text.slice(0, end)}\r\n`;
    start = end === -1 ? text.length : end + 1;
  }
  const empty = ','.repeat(width - 1);
  for (const count of counts) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    let at = start;
    // The text of the next `cells` cells, the last of the record's running to its end.
    const take = (cells: number, last: boolean) => {
      const cut = last ? end : pastCells(text, at, cells);
      const taken = text.slice(at, cut);
      at = cut + 1;
      return taken;
    };
    const head = before.length > 0 ? `${take(before.length, after.length === 0 && count === 0)},` : '';
    const tail = after.length > 0 ? `,${take(after.length, count === 0)}` : '';
    if (count === 0) rows += `${head}${empty}${tail}\r\n`;
    for (let element = 0; element < count; element++) rows += `${head}${take(width, element === count - 1)}${tail}\r\n`;
    start = end + 1;
  }
  return rows;
}

/** Where the `cells`-th cell from `from` ends (its comma), in a text where no cell is quoted. */
function pastCells(text: string, from: number, cells: number): number {
  let at = from - 1;
  for (let cell = 0; cell < cells; cell++) at = text.indexOf(',', at + 1);
  return at;
}

/**
 * csvText a row at a time: each row's cells, the record's own copied into the row of each element
 * of its spread array, all given to csv-stringify.
 */
export function csvRowsText(layout: CsvLayout, records: readonly unknown[], header: boolean): string {
  const { columns } = layout;
  const { columnReaders, ofRecord, ofElement } = columnsOf(layout);
  const count = columns.length;
  const rows: Cell[][] = [];
  // The header is written as a row of its own: csv-stringify's `columns` option costs more per
  // record than all the rest (it looks every cell up by name).
  if (header) rows.push(columns.map((column) => column.name));
  for (const record of records) {
    const elements = elementsOf(layout, record);
    const own: Cell[] = new Array<Cell>(count);
    for (const index of ofRecord) own[index] = cellAt(columnReaders[index]!, record as Record<string, unknown>);
    const times = elements ? elements.length : 1;
    for (let at = 0; at < times; at++) {
      const element = elements?.[at] as Record<string, unknown> | null | undefined;
      const row = at === times - 1 ? own : own.slice();
      for (const index of ofElement) row[index] = cellAt(columnReaders[index]!, element);
      rows.push(row);
    }
  }
  return stringify(rows, CSV_OPTIONS);
}

/**
 * Copies of an object with the members `members` names, in their order, each through its own
 * function (a member the object lacks stays out); a value that is no object passes as it is, null
 * for undefined.
 */
export function memberCopier(
  members: readonly (readonly [name: string, copy: (value: unknown) => unknown])[],
): (value: unknown) => unknown {
  return (value) => {
    if (value === null || typeof value !== 'object') return value ?? null;
    const source = value as Record<string, unknown>;
    const copy: Record<string, unknown> = {};
    for (const [name, copyMember] of members) if (source[name] !== undefined) copy[name] = copyMember(source[name]);
    return copy;
  };
}

/**
 * A record as a page's data holds it: the schema's members only, in its order, nested objects
 * and arrays of objects likewise (what the JSON serializer of a page writes).
 */
export function projector(schema: TSchema): (value: unknown) => unknown {
  const shape = structureOf(schema as Shape);
  if (shape.type === 'object' && shape.properties) {
    return memberCopier(
      Object.entries(shape.properties).map(([name, member]) => [name, projector(member as TSchema)] as const),
    );
  }
  if (shape.type === 'array' && shape.items) {
    const project = projector(shape.items as TSchema);
    return (value) => (Array.isArray(value) ? value.map(project) : value);
  }
  return (value) => value;
}

/**
 * The JSON text of a record as a page's data holds it: `JSON.stringify(projector(schema)(value))`,
 * byte for byte, without building the projected copy (an export writes millions of records). Each
 * member's writer is chosen once from its schema: text and numbers, most of a record, are written
 * without a call of JSON.stringify each (about half its cost on short text); a value of another
 * type than its schema says is written as JSON.stringify writes it.
 */
export function jsonWriter(schema: TSchema): (value: unknown) => string {
  const shape = structureOf(schema as Shape);
  if (shape.type === 'object' && shape.properties) {
    const entries = Object.entries(shape.properties);
    const names = entries.map(([name]) => name);
    const keys = entries.map(([name]) => `${JSON.stringify(name)}:`);
    const writers = entries.map(([, member]) => jsonWriter(member as TSchema));
    const count = names.length;
    return (value) => {
      if (value === null || typeof value !== 'object') return jsonLeaf(value ?? null);
      const source = value as Record<string, unknown>;
      let text = '{';
      for (let index = 0; index < count; index++) {
        const member = source[names[index]!];
        if (member === undefined) continue;
        if (text.length > 1) text += ',';
        text += keys[index]!;
        text += writers[index]!(member);
      }
      return `${text}}`;
    };
  }
  if (shape.type === 'array' && shape.items) {
    const write = jsonWriter(shape.items as TSchema);
    return (value) => {
      if (!Array.isArray(value)) return jsonLeaf(value);
      let text = '[';
      for (let index = 0; index < value.length; index++) {
        if (index > 0) text += ',';
        text += write(value[index]);
      }
      return `${text}]`;
    };
  }
  if (shape.type === 'string') return jsonText;
  if (shape.type === 'integer' || shape.type === 'number') return jsonNumber;
  return jsonLeaf;
}

/** A value as JSON.stringify writes it (undefined, in an array, as null). */
function jsonLeaf(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return jsonText(value);
    case 'number':
      return jsonNumber(value);
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      return JSON.stringify(value) ?? 'null';
  }
}

/** Short text is written between quotes as it is when nothing in it needs escaping (RFC 8259 section 7); anything else by JSON.stringify. */
function jsonText(value: unknown): string {
  if (typeof value !== 'string') return jsonLeaf(value);
  if (value.length > 64) return JSON.stringify(value);
  for (let index = 0; index < value.length; index++) {
    const code = value.charCodeAt(index);
    // Quote, backslash, controls; surrogates, which JSON.stringify escapes when unpaired.
    if (code < 0x20 || code === 0x22 || code === 0x5c || (code >= 0xd800 && code <= 0xdfff))
      return JSON.stringify(value);
  }
  return `"${value}"`;
}

function jsonNumber(value: unknown): string {
  if (typeof value !== 'number') return jsonLeaf(value);
  return Number.isFinite(value) ? `${value}` : 'null';
}
