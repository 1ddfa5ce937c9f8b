/**
 * The ranges a measurement must fall in, wherever it comes from (a feed's PUT, the provider's
 * answer): the schema, the provider's answer check and the database's CHECK constraints say the
 * same. Every one is bounded on both sides, so that 1e400 (which JSON parses to Infinity) cannot
 * pass as "at least 0".
 */
export const MEASUREMENT_RANGES = {
  temperature_c: { minimum: -100, maximum: 70 },
  humidity_pct: { minimum: 0, maximum: 100 },
  // The strongest gust ever measured was 408 km/h.
  wind_kph: { minimum: 0, maximum: 500 },
} as const;
