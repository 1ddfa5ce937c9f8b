/** The one way rowi writes a timestamp: RFC 3339, UTC, millisecond precision. */
export function nowTimestamp(): string {
  return new Date().toISOString();
}

/**
 * Parses an RFC 3339 date-time (with a mandatory offset) into rowi's stored form, or returns
 * undefined when the text is not one. Date.parse alone accepts far more than RFC 3339.
 */
export function toTimestamp(text: string): string | undefined {
  const match = RFC3339.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second] = match.map(Number) as number[];
  if (month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth(year!, month!)) return undefined;
  if (hour! > 23 || minute! > 59 || second! > 59) return undefined;
  const time = Date.parse(text);
  return Number.isNaN(time) ? undefined : new Date(time).toISOString();
}

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}
