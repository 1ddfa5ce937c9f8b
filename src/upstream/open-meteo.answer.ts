import { UpstreamFailure } from './upstream-failure.js';
import { MEASUREMENT_RANGES } from './ranges.js';
import type { CurrentWeather } from './weather-provider.js';
import { conditionForWmoCode } from './wmo-codes.js';

/**
 * Reads Open-Meteo's forecast answer (https://open-meteo.com/en/docs, `current=` block) into
 * rowi's fields. Nothing is guessed, converted or clamped: a unit other than the one asked for,
 * a missing or wrong-typed field, or a value outside what the Earth's surface has seen means
 * the answer is not what rowi asked for, and it is refused as a bad answer.
 */

const EXPECTED_UNITS = {
  time: 'iso8601',
  temperature_2m: '°C',
  relative_humidity_2m: '%',
  wind_speed_10m: 'km/h',
  weather_code: 'wmo code',
} as const;

/** `current.time` is local time in the requested timezone (GMT), to the minute, without offset. */
const LOCAL_MINUTE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})$/;

export function readOpenMeteoAnswer(body: unknown): CurrentWeather {
  const answer = asObject(body, 'the answer');
  if (answer.utc_offset_seconds !== 0)
    refuse(`utc_offset_seconds is ${JSON.stringify(answer.utc_offset_seconds)}, not 0 (GMT was asked for)`);
  const units = asObject(answer.current_units, 'current_units');
  for (const [field, unit] of Object.entries(EXPECTED_UNITS)) {
    if (units[field] !== unit)
      refuse(`current_units.${field} is ${JSON.stringify(units[field])}, not ${JSON.stringify(unit)}`);
  }
  const current = asObject(answer.current, 'current');
  const code = numberIn(current, 'weather_code', { minimum: 0, maximum: 99 });
  const conditions = conditionForWmoCode(code);
  if (conditions === undefined) refuse(`current.weather_code ${code} is not a known WMO weather code`);
  return {
    temperature_c: numberIn(current, 'temperature_2m', MEASUREMENT_RANGES.temperature_c),
    humidity_pct: numberIn(current, 'relative_humidity_2m', MEASUREMENT_RANGES.humidity_pct),
    wind_kph: numberIn(current, 'wind_speed_10m', MEASUREMENT_RANGES.wind_kph),
    conditions,
    observed_at: observedAt(current.time),
  };
}

/** The `reason` of Open-Meteo's error body ({"error":true,"reason":"..."}), if it has one. */
export function openMeteoErrorReason(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const reason = (body as Record<string, unknown>).reason;
  return typeof reason === 'string' ? reason.slice(0, 500) : undefined;
}

function observedAt(time: unknown): string {
  const parts = typeof time === 'string' ? LOCAL_MINUTE.exec(time) : null;
  if (!parts) refuse(`current.time is ${JSON.stringify(time)}, not YYYY-MM-DDTHH:MM`);
  const [year, month, day, hour, minute] = parts.slice(1).map(Number) as [number, number, number, number, number];
  const instant = new Date(Date.UTC(year, month - 1, day, hour, minute));
  // Date.UTC rolls 2026-02-30 over into March; a date that does not read back is not a date.
  if (instant.toISOString().slice(0, 16) !== time)
    refuse(`current.time ${JSON.stringify(time)} is not a valid date and time`);
  return instant.toISOString();
}

function numberIn(
  object: Record<string, unknown>,
  field: string,
  { minimum, maximum }: { minimum: number; maximum: number },
): number {
  const value = object[field];
  if (typeof value !== 'number' || !Number.isFinite(value))
    refuse(`current.${field} is ${JSON.stringify(value)}, not a number`);
  if (value < minimum) refuse(`current.${field} is ${value}, below ${minimum}`);
  if (value > maximum) refuse(`current.${field} is ${value}, above ${maximum}`);
  return value;
}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) refuse(`${what} is not an object`);
  return value as Record<string, unknown>;
}

function refuse(problem: string): never {
  throw new UpstreamFailure('bad-answer', `open-meteo answer refused: ${problem}`, { status: 200 });
}
