import { stringify } from 'csv-stringify/sync';
import type { TSchema } from 'typebox';

/**
 * What an exported record looks like, derived from the schema of the record a list answers (so
 * the columns follow the schema, whatever the stored row holds beside it: its version, its owner).
 *
 * CSV (docs/reading.md "CSV"): a column per field, in the schema's order; an object's fields as
 * dotted columns (`user.name`); the one array of objects a record may hold (an order's lines)
 * spread over rows: a row per element with the record's own fields repeated and the element's as
 * dotted columns (`lines.item_id`), one row with those cells empty when the array is empty. Any
 * other structure (a free-form object, an array of values) is one cell of JSON text. null is an
 * empty cell, booleans are true and false. Text that a spreadsheet would run as a formula (its
 * first character =, +, -, @, a tab or a carriage return) starts with a single quote, as OWASP
 * recommends for CSV injection; numbers are written as numbers (-5 stays -5).
 */
export interface CsvLayout {
  columns: CsvColumn[];
  /** The array of objects spread over rows, if any. */
  spread: string | undefined;
}

export interface CsvColumn {
  name: string;
  /** The member of the record, and of the object or array element under it. */
  member: string;
  inner: string | undefined;
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

export function csvLayout(record: TSchema): CsvLayout {
  const columns: CsvColumn[] = [];
  let spread: string | undefined;
  for (const [member, raw] of Object.entries((record as Shape).properties ?? {})) {
    const schema = structureOf(raw);
    const inner =
      schema.type === 'array' ? schema.items?.properties : schema.type === 'object' ? schema.properties : undefined;
    if (inner && (schema.type === 'object' || spread === undefined)) {
      if (schema.type === 'array') spread = member;
      for (const [name, field] of Object.entries(inner))
        columns.push({ name: `${member}.${name}`, member, inner: name, json: isStructure(field) });
    } else {
      columns.push({ name: member, member, inner: undefined, json: isStructure(schema) });
    }
  }
  return { columns, spread };
}

/** The columns of a layout that `keep` keeps; the array spread over rows only while one of its columns is kept. */
export function keepColumns(layout: CsvLayout, keep: (column: CsvColumn) => boolean): CsvLayout {
  const columns = layout.columns.filter(keep);
  const spread = columns.some((column) => column.member === layout.spread) ? layout.spread : undefined;
  return { columns, spread };
}

type Cell = string | number | null;

function cellOf(value: unknown, json: boolean): Cell {
  if (value === null || value === undefined) return null;
  if (json) return JSON.stringify(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return value as string | number;
}

const CSV_OPTIONS = {
  escape_formulas: true,
  record_delimiter: '\r\n',
  // A lone line feed or carriage return in a field is quoted too, not only the record delimiter:
  // unquoted, it would split the record for any reader.
  quote_record_delimiter: true,
} as const;

/** The CSV rows of a chunk of records, with the header row first when `header`; each row ends with CRLF. */
export function csvText(layout: CsvLayout, records: readonly unknown[], header: boolean): string {
  const { columns, spread } = layout;
  const rows: Cell[][] = [];
  // The header is written as a row of its own: csv-stringify's `columns` option costs more per
  // record than all the rest (it looks every cell up by name).
  if (header) rows.push(columns.map((column) => column.name));
  for (const value of records) {
    const record = value as Record<string, unknown>;
    const elements = spread === undefined ? undefined : (record[spread] as unknown[] | undefined);
    const count = elements && elements.length > 0 ? elements.length : 1;
    for (let at = 0; at < count; at++) {
      const element = elements?.[at];
      const row: Cell[] = new Array<Cell>(columns.length);
      for (let index = 0; index < columns.length; index++) {
        const column = columns[index]!;
        const holder = column.inner === undefined ? record : column.member === spread ? element : record[column.member];
        const cell =
          column.inner === undefined
            ? record[column.member]
            : (holder as Record<string, unknown> | null | undefined)?.[column.inner];
        row[index] = cellOf(cell, column.json);
      }
      rows.push(row);
    }
  }
  return stringify(rows, CSV_OPTIONS);
}

/**
 * A record as a page's data holds it: the schema's members only, in its order, nested objects
 * and arrays of objects likewise (what the JSON serializer of a page writes).
 */
export function projector(schema: TSchema): (value: unknown) => unknown {
  const shape = structureOf(schema as Shape);
  if (shape.type === 'object' && shape.properties) {
    const members = Object.entries(shape.properties).map(
      ([name, member]) => [name, projector(member as TSchema)] as const,
    );
    return (value) => {
      if (value === null || typeof value !== 'object') return value ?? null;
      const source = value as Record<string, unknown>;
      const copy: Record<string, unknown> = {};
      for (const [name, project] of members) if (source[name] !== undefined) copy[name] = project(source[name]);
      return copy;
    };
  }
  if (shape.type === 'array' && shape.items) {
    const project = projector(shape.items as TSchema);
    return (value) => (Array.isArray(value) ? value.map(project) : value);
  }
  return (value) => value;
}

/**
 * The JSON text of a record as a page's data holds it: `JSON.stringify(projector(schema)(value))`,
 * byte for byte, without building the projected copy (an export writes millions of records).
 */
export function jsonWriter(schema: TSchema): (value: unknown) => string {
  const shape = structureOf(schema as Shape);
  if (shape.type === 'object' && shape.properties) {
    const members = Object.entries(shape.properties).map(
      ([name, member]) => [name, `${JSON.stringify(name)}:`, jsonWriter(member as TSchema)] as const,
    );
    return (value) => {
      if (value === null || typeof value !== 'object') return jsonLeaf(value ?? null);
      const source = value as Record<string, unknown>;
      let text = '{';
      for (const [name, key, write] of members) {
        const member = source[name];
        if (member === undefined) continue;
        if (text.length > 1) text += ',';
        text += key;
        text += write(member);
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
  return jsonLeaf;
}

/** A value as JSON.stringify writes it (undefined, in an array, as null). */
function jsonLeaf(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? `${value}` : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      return JSON.stringify(value) ?? 'null';
  }
}
