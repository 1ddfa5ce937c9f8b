import type { Condition } from './conditions.js';

/**
 * WMO 4677 present-weather codes as Open-Meteo's `weather_code` uses them, grouped onto rowi's
 * vocabulary. Codes outside this table are not guessed at: the caller treats them as a bad
 * answer, so a provider that starts sending new codes is noticed instead of mislabelled.
 */
const CONDITION_BY_WMO_CODE: ReadonlyMap<number, Condition> = new Map<number, Condition>([
  [0, 'clear'],
  [1, 'mostly-clear'],
  [2, 'partly-cloudy'],
  [3, 'overcast'],
  [45, 'fog'],
  [48, 'fog'],
  [51, 'drizzle'],
  [53, 'drizzle'],
  [55, 'drizzle'],
  [56, 'freezing-drizzle'],
  [57, 'freezing-drizzle'],
  [61, 'rain'],
  [63, 'rain'],
  [65, 'rain'],
  [66, 'freezing-rain'],
  [67, 'freezing-rain'],
  [71, 'snow'],
  [73, 'snow'],
  [75, 'snow'],
  [77, 'snow'],
  [80, 'showers'],
  [81, 'showers'],
  [82, 'showers'],
  [85, 'snow-showers'],
  [86, 'snow-showers'],
  [95, 'thunderstorm'],
  [96, 'thunderstorm'],
  [99, 'thunderstorm'],
]);

export function conditionForWmoCode(code: number): Condition | undefined {
  return CONDITION_BY_WMO_CODE.get(code);
}
