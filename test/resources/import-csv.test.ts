import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { parse as parseCsv } from 'csv-parse/sync';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CSV_DELIMITERS, RecordBound, type CsvDelimiter } from '../../src/engine/imports/csv.js';

/**
 * RecordBound (docs/bulk.md "Imports": a row longer than 1 MiB refuses its row, and reading goes
 * on): random CSV files, with quoted fields holding separators, quotes, CR and LF, cut into random
 * chunks, read by the parser rowi uses after passing through the bound.
 */
const CHARACTERS = ['a', 'b', ',', ';', '\t', '"', '\n', '\r', ' ', 'é', '€'];

/** A field as RFC 4180 writes it: quoted when it holds a separator, a quote, CR or LF, or begins with a space. */
function encodeField(field: string, delimiter: string): string {
  return /[",;\t\r\n]/.test(field) || field.startsWith(' ') || field.includes(delimiter)
    ? `"${field.replaceAll('"', '""')}"`
    : field;
}

const files = fc.record({
  delimiter: fc.constantFrom(...CSV_DELIMITERS),
  records: fc.array(
    fc.array(
      fc.array(fc.constantFrom(...CHARACTERS), { maxLength: 12 }).map((chars) => chars.join('')),
      {
        minLength: 1,
        maxLength: 5,
      },
    ),
    { minLength: 1, maxLength: 12 },
  ),
  maxBytes: fc.integer({ min: 1, max: 40 }),
  cuts: fc.array(fc.integer({ min: 1, max: 16 }), { minLength: 1, maxLength: 8 }),
});

/** The bytes of `file` through a RecordBound, fed in chunks of the sizes `cuts` gives, in turn. */
async function bounded(file: Buffer, delimiter: CsvDelimiter, maxBytes: number, cuts: number[]) {
  const chunks: Buffer[] = [];
  for (let at = 0, turn = 0; at < file.length; at += cuts[turn++ % cuts.length]!)
    chunks.push(file.subarray(at, at + cuts[turn % cuts.length]!));
  const bound = new RecordBound(delimiter, maxBytes);
  const out = await buffer(Readable.from(chunks).pipe(bound));
  return { out, faults: bound.faults };
}

const parse = (csv: Buffer, delimiter: string) =>
  parseCsv(csv, { bom: true, delimiter, record_delimiter: ['\r\n', '\n'], relax_column_count: true }) as string[][];

describe('RecordBound', () => {
  it('passes every record within the bound as it is, and refuses each longer one, the records after it read as they were written', async () => {
    await fc.assert(
      fc.asyncProperty(files, async ({ delimiter, records, maxBytes, cuts }) => {
        const lines = records.map((fields) => fields.map((field) => encodeField(field, delimiter)).join(delimiter));
        const file = Buffer.from(`${lines.join('\n')}\n`);
        const { out, faults } = await bounded(file, delimiter, maxBytes, cuts);
        const parsed = parse(out, delimiter);
        expect(parsed).toHaveLength(records.length);
        records.forEach((fields, index) => {
          const long = Buffer.byteLength(lines[index]!) > maxBytes;
          expect(faults.get(index + 1)).toBe(long ? 'too-long' : undefined);
          if (!long) expect(parsed[index]).toEqual(fields);
        });
      }),
      { numRuns: 300 },
    );
  });

  it('passes a file whose records are all within the bound byte for byte', async () => {
    await fc.assert(
      fc.asyncProperty(files, async ({ delimiter, records, cuts }) => {
        const file = Buffer.from(
          `\uFEFF${records.map((fields) => fields.map((field) => encodeField(field, delimiter)).join(delimiter)).join('\r\n')}`,
        );
        const { out, faults } = await bounded(file, delimiter, 1_000_000, cuts);
        expect(out).toEqual(file);
        expect(faults.size).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  it('notes a quoted field past the bound that runs to the end of the file as unclosed', async () => {
    const { out, faults } = await bounded(Buffer.from(`a,b\n1,"${'x'.repeat(50)}\n2,3\n`), ',', 20, [7]);
    expect(faults).toEqual(new Map([[2, 'unclosed']]));
    expect(parse(out, ',')).toHaveLength(2);
  });
});
