/** The one way rowi writes a timestamp: RFC 3339, UTC, millisecond precision. */
export function nowTimestamp(): string {
  return new Date().toISOString();
}

/**
 * The instants rowi stores: years 0001 to 9999 in UTC. Stored timestamps are text that both
 * databases compare as text, and every client can parse back: outside these years JavaScript
 * writes six-digit years with a sign ("-000001-12-31T23:00:00.000Z"), which is not RFC 3339, sorts
 * wrongly as text, and breaks clients that read it. Checked after the offset is applied, since
 * "0001-01-01T00:30:00+01:00" is in year 0 once in UTC.
 */
export const EARLIEST_TIMESTAMP = '0001-01-01T00:00:00.000Z';
export const LATEST_TIMESTAMP = '9999-12-31T23:59:59.999Z';
const EARLIEST_MS = Date.parse(EARLIEST_TIMESTAMP);
const LATEST_MS = Date.parse(LATEST_TIMESTAMP);

/**
 * Parses an RFC 3339 date-time (with a mandatory offset) into rowi's stored form, or returns
 * undefined when the text is not one or names an instant rowi cannot store (see above). Date.parse
 * alone accepts far more than RFC 3339. A leap second (23:59:60), which RFC 3339 allows, is
 * refused: JavaScript and both databases cannot represent it, and would silently move it to the
 * next minute.
 */
export function toTimestamp(text: string): string | undefined {
  const match = RFC3339.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second] = match.map(Number) as number[];
  if (month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth(year!, month!)) return undefined;
  if (hour! > 23 || minute! > 59 || second! > 59) return undefined;
  const time = Date.parse(text);
  if (Number.isNaN(time) || time < EARLIEST_MS || time > LATEST_MS) return undefined;
  return new Date(time).toISOString();
}

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

function daysInMonth(year: number, month: number): number {
  // Date.UTC maps years 0–99 to 1900–1999; setUTCFullYear does not.
  const date = new Date(0);
  date.setUTCFullYear(year, month, 0);
  return date.getUTCDate();
}
