import { parse } from 'csv-parse/sync';
import fc from 'fast-check';
import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { csvLayout, csvRowsText, csvText, jsonWriter, keepColumns, projector } from '../../src/http/export-shapes.js';

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

/** The parser reads the text as UTF-8: a lone surrogate comes back as U+FFFD, as any reader of the file would see it. */
const utf8 = (value: string) => Buffer.from(value, 'utf8').toString('utf8');

/** What a spreadsheet would run as a formula gets a single quote in front (OWASP), whatever else the text holds. */
const neutralised = (value: string) => (/^[=+\-@\t\r＝＋－＠]/.test(value) ? `'${value}` : value);

describe('export shapes', () => {
  it('CSV: read back by a CSV parser, one row per record (per line where lines are spread), every row whole, text as written but for the formula quote', () => {
    const layout = csvLayout(Record);
    const name = layout.columns.findIndex((column) => column.name === 'name');
    fc.assert(
      fc.property(fc.array(record, { maxLength: 5 }), (records) => {
        const rows = parse(csvText(layout, records, true), { relax_column_count: false }) as string[][];
        expect(rows[0]).toEqual(layout.columns.map((column) => column.name));
        const expected = records.flatMap((value) =>
          Array.from({ length: Math.max(1, value.lines.length) }, () => value),
        );
        expect(rows.slice(1).map((row) => row[name])).toEqual(
          expected.map((value) => utf8(neutralised(value.name ?? ''))),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('CSV: the same text as writing every row whole, for any records, any columns kept, with or without a header', () => {
    const layout = csvLayout(Record);
    // Text that csv-stringify never quotes, so the rows are put together from their parts (csvText).
    const plain = fc.string({ unit: fc.constantFrom('=', '-', '@', '\t', "'", 'a', ' ', 'é', '\u0000') });
    const plainRecord = fc.record(
      {
        id: fc.integer(),
        name: plain,
        owner: fc.option(fc.integer()),
        flag: fc.boolean(),
        address: fc.option(fc.record({ city: plain, zip: fc.option(plain) })),
        lines: fc.array(fc.record({ quantity: number, price: plain, tags: fc.constant([]) }), { maxLength: 3 }),
        extra: fc.constant({}),
        total: number,
      },
      { requiredKeys: ['id', 'lines'] },
    );
    fc.assert(
      fc.property(
        fc.array(fc.oneof(record, plainRecord, plainRecord), { maxLength: 5 }),
        fc.subarray(layout.columns),
        fc.boolean(),
        (records, kept, header) => {
          const some = keepColumns(layout, (column) => kept.includes(column));
          expect(csvText(some, records, header)).toBe(csvRowsText(some, records, header));
        },
      ),
      // An empty export's one piece: the header row alone.
      { numRuns: 500, examples: [[[], layout.columns, true]] },
    );
  });

  it('CSV: objects inside objects are dotted columns, the first array of objects is spread, a free-form object is one JSON cell', () => {
    const Nested = Type.Object({
      id: Type.Integer(),
      order: Type.Union([
        Type.Object({
          user: Type.Union([Type.Object({ email: Type.String() }), Type.Null()]),
          lines: Type.Array(Type.Object({ item: Type.Object({ name: Type.String() }) })),
        }),
        Type.Null(),
      ]),
      extra: Type.Object({}, { additionalProperties: true }),
    });
    const layout = csvLayout(Nested);
    expect(layout.columns.map((column) => column.name)).toEqual([
      'id',
      'order.user.email',
      'order.lines.item.name',
      'extra',
    ]);
    const text = csvText(
      layout,
      [
        {
          id: 1,
          order: { user: { email: 'a@x' }, lines: [{ item: { name: 'p' } }, { item: { name: 'q' } }] },
          extra: { k: 1 },
        },
        { id: 2, order: null, extra: {} },
      ],
      true,
    );
    expect(text).toBe(
      'id,order.user.email,order.lines.item.name,extra\r\n1,a@x,p,"{""k"":1}"\r\n1,a@x,q,"{""k"":1}"\r\n2,,,{}\r\n',
    );
  });

  it('CSV: a formula is neutralised with a quote, a number is not, and a field with a quote, comma or line break is quoted', () => {
    const layout = csvLayout(Type.Object({ v: Type.Union([Type.String(), Type.Number(), Type.Null()]) }));
    const cells = ['=A1', '+1', '-2', '@x', '\tx', '\rx', '＝1', -2, 0, null, '', 'a"b', 'a,b', 'a\nb', 'a\rb'];
    expect(cells.map((v) => csvText(layout, [{ v }], false).slice(0, -2))).toEqual([
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
