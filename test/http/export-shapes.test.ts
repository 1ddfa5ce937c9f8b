import { parse } from 'csv-parse/sync';
import fc from 'fast-check';
import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { guardFormula } from '../../src/http/csv-formulas.js';
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
      '\u00a0',
      '\u3000',
      '\ufe62',
      '\ufe66',
      '\u2212',
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

/**
 * What a spreadsheet would run as a formula gets a single quote in front (OWASP), whatever else the
 * text holds: a tab, CR or LF first, or a sign (= + - @, full-width, small, the minus sign) after
 * any spaces (JavaScript's \s: ASCII and Unicode spaces, line ends, a BOM; and NEL, zero-width space).
 */
const neutralised = (value: string) =>
  /^[\t\r\n]|^[\s\u0085\u200b]*[=+\-@＝＋－＠﹦﹢﹣﹫−]/u.test(value) ? `'${value}` : value;

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

/**
 * The formula guard (docs/reading.md "CSV"), against what spreadsheets evaluate once they have
 * trimmed a cell: leading spaces of every kind, then = + - @ in any of the forms they take.
 */
describe('CSV: the formula guard', () => {
  const BLANKS = [
    ' ',
    '\t',
    '\r',
    '\n',
    '\u000b',
    '\u000c',
    '\u0085',
    '\u00a0',
    '\u1680',
    '\u2000',
    '\u2007',
    '\u200a',
    '\u200b',
    '\u2028',
    '\u2029',
    '\u202f',
    '\u205f',
    '\u3000',
    '\ufeff',
  ];
  const SIGNS = [
    '=',
    '+',
    '-',
    '@',
    '\uff1d',
    '\uff0b',
    '\uff0d',
    '\uff20',
    '\ufe66',
    '\ufe62',
    '\ufe63',
    '\ufe6b',
    '\u2212',
  ];
  const layout = csvLayout(Type.Object({ v: Type.String() }));
  const cellOf = (value: string) =>
    (parse(csvText(layout, [{ v: value }], false), { bom: false }) as string[][])[0]![0]!;

  it('a sign after any run of spaces, in any form, gets a single quote in front; the text is kept whole after it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...BLANKS), { maxLength: 4 }).map((blanks) => blanks.join('')),
        fc.constantFrom(...SIGNS),
        fc.string(),
        (blanks, sign, rest) => {
          const value = `${blanks}${sign}${rest}`;
          expect(guardFormula(value)).toBe(`'${value}`);
          expect(cellOf(value)).toBe(utf8(`'${value}`));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('text that begins, after its spaces, with anything but a sign is written as it is (but a tab, CR or LF first)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(' ', '\u00a0', '\u3000'), { maxLength: 3 }).map((blanks) => blanks.join('')),
        fc.string({ minLength: 1 }).filter((rest) => !SIGNS.includes(rest[0]!) && !BLANKS.includes(rest[0]!)),
        (blanks, rest) => {
          const value = `${blanks}${rest}`;
          expect(guardFormula(value)).toBe(value);
          expect(cellOf(value)).toBe(utf8(value));
        },
      ),
      { numRuns: 500 },
    );
  });

  it.each([
    [' =1+1', "' =1+1"],
    ['   +cmd', "'   +cmd"],
    ['\u00a0=HYPERLINK("x")', '\'\u00a0=HYPERLINK("x")'],
    ['\u3000@SUM(A1)', "'\u3000@SUM(A1)"],
    ['\t-2', "'\t-2"],
    ['\tplain', "'\tplain"],
    ['\n=1', "'\n=1"],
    ['\ufe66cmd', "'\ufe66cmd"],
    ['\ufe62 1', "'\ufe62 1"],
    ['\ufe63 1', "'\ufe63 1"],
    ['\ufe6bx', "'\ufe6bx"],
    ['\uff1d1', "'\uff1d1"],
    ['\uff0b1', "'\uff0b1"],
    ['\uff0d1', "'\uff0d1"],
    ['\uff20x', "'\uff20x"],
    ['\u22121', "'\u22121"],
    ['\ufeff=1', "'\ufeff=1"],
    ['a =1', 'a =1'],
    ['  plain', '  plain'],
    ['1-2', '1-2'],
    ["'=already", "'=already"],
    ['', ''],
  ])('the cell %j is written %j', (value, written) => {
    expect(cellOf(value)).toBe(written);
  });
});
