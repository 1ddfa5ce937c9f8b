import { stringify } from 'csv-stringify/sync';
import fc from 'fast-check';
import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { csvCell, csvLayout, csvText, jsonWriter, projector, type CsvLayout } from '../../src/http/export-shapes.js';

/** A record with every kind of member an export meets: text, numbers, null, booleans, an object, lines, free-form JSON. */
const Record = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  owner: Type.Union([Type.Integer(), Type.Null()]),
  flag: Type.Boolean(),
  address: Type.Union([
    Type.Object({ city: Type.String(), zip: Type.Union([Type.String(), Type.Null()]) }),
    Type.Null(),
  ]),
  lines: Type.Array(Type.Object({ quantity: Type.Integer(), price: Type.String(), tags: Type.Array(Type.String()) })),
  extra: Type.Object({}, { additionalProperties: true }),
  total: Type.Number(),
});

/** Text with what CSV and JSON must escape: formula starts, quotes, commas, line breaks, surrogates, controls. */
const text = fc.oneof(
  fc.string({
    unit: fc.constantFrom(
      '=',
      '+',
      '-',
      '@',
      '\t',
      '\r',
      '\n',
      '"',
      ',',
      "'",
      'a',
      ' ',
      '＝',
      '＋',
      '－',
      '＠',
      'é',
      '\u2028',
      '\ud83d',
      '\u0000',
    ),
  }),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('', '-5', '=1+2', 'a "b", c\nd'),
);
const number = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(-0));
const record = fc.record(
  {
    id: fc.integer(),
    name: text,
    owner: fc.option(fc.integer()),
    flag: fc.boolean(),
    address: fc.option(fc.record({ city: text, zip: fc.option(text) }, { requiredKeys: ['city'] })),
    lines: fc.array(fc.record({ quantity: number, price: text, tags: fc.array(text, { maxLength: 2 }) }), {
      maxLength: 3,
    }),
    extra: fc.dictionary(text, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }),
    total: number,
    // Stored beside the record (a version, an owner's key): never exported.
    version: fc.integer(),
  },
  { requiredKeys: ['id', 'lines'] },
);

/**
 * The CSV of rowi before its own writer: csv-stringify with the options it was called with, but
 * for quote_record_delimiter, which it left at its default: off with a record delimiter given, so
 * that a lone line feed or carriage return went unquoted and split the record for any reader.
 */
function csvStringifyText(layout: CsvLayout, records: readonly Record<string, unknown>[], header: boolean): string {
  const cellOf = (value: unknown, json: boolean) => {
    if (value === null || value === undefined) return null;
    if (json) return JSON.stringify(value);
    if (typeof value === 'boolean') return value ? 'true' : 'false';
    return value;
  };
  const rows: unknown[][] = [];
  for (const value of records) {
    const elements = layout.spread === undefined ? undefined : (value[layout.spread] as unknown[] | undefined);
    for (const element of elements && elements.length > 0 ? elements : [undefined]) {
      rows.push(
        layout.columns.map((column) => {
          if (column.inner === undefined) return cellOf(value[column.member], column.json);
          const holder = column.member === layout.spread ? element : value[column.member];
          return cellOf((holder as Record<string, unknown> | null | undefined)?.[column.inner], column.json);
        }),
      );
    }
  }
  if (header) rows.unshift(layout.columns.map((column) => column.name));
  return stringify(rows, { escape_formulas: true, record_delimiter: '\r\n', quote_record_delimiter: true });
}

describe('export shapes', () => {
  it('CSV: the same text as csv-stringify writes with escape_formulas and every line break quoted, for any records', () => {
    const layout = csvLayout(Record);
    fc.assert(
      fc.property(fc.array(record, { maxLength: 5 }), fc.boolean(), (records, header) => {
        expect(csvText(layout, records, header)).toBe(csvStringifyText(layout, records, header));
      }),
      { numRuns: 300 },
    );
  });

  it('CSV: a formula is neutralised with a quote, a number is not, and a field with a quote, comma or line break is quoted', () => {
    const cells = ['=A1', '+1', '-2', '@x', '\tx', '\rx', '＝1', -2, 0, null, '', 'a"b', 'a,b', 'a\nb', 'a\rb'];
    expect(cells.map(csvCell)).toEqual([
      "'=A1",
      "'+1",
      "'-2",
      "'@x",
      "'\tx",
      `"'\rx"`,
      "'＝1",
      '-2',
      '0',
      '',
      '',
      '"a""b"',
      '"a,b"',
      '"a\nb"',
      '"a\rb"',
    ]);
  });

  it('NDJSON: the same text as JSON.stringify of the projected record, for any records', () => {
    const write = jsonWriter(Record);
    const project = projector(Record);
    fc.assert(
      fc.property(record, (value) => {
        expect(write(value)).toBe(JSON.stringify(project(value)));
      }),
      { numRuns: 500 },
    );
    expect(write(null)).toBe('null');
  });
});
