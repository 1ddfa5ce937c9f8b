/**
 * The documented vocabulary of `conditions` (docs/guide.md "Weather"): one word for what the sky does,
 * coarse enough that every feed and provider can map onto it. It follows the groups of the WMO
 * present-weather codes (WMO 4677, as Open-Meteo's `weather_code` uses them).
 */
export const CONDITIONS = [
  'clear',
  'mostly-clear',
  'partly-cloudy',
  'overcast',
  'fog',
  'drizzle',
  'freezing-drizzle',
  'rain',
  'freezing-rain',
  'snow',
  'showers',
  'snow-showers',
  'thunderstorm',
] as const;

export type Condition = (typeof CONDITIONS)[number];
