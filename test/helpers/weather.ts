import type { TestApp } from './app.js';

/**
 * Arranging and reading back weather in tests of /v1/weather: each file starts one app and binds
 * these to it (`weatherHelpers(() => test)`), so places are unique per file and "nothing stored
 * changed" is read the same way everywhere.
 */
export const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };

/** The vocabulary of `conditions` as documented, written out so a change to it shows here. */
export const DOCUMENTED_CONDITIONS = [
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
];

/** A valid PUT body; observed_at is a fixed instant in the past unless overridden. */
export function buildObservation(overrides: Record<string, unknown> = {}) {
  return {
    temperature_c: 21.5,
    humidity_pct: 40,
    wind_kph: 12,
    conditions: 'partly-cloudy',
    observed_at: '2025-06-01T12:00:00.000Z',
    ...overrides,
  };
}

export function weatherHelpers(app: () => TestApp) {
  let placeSequence = 0;

  const putObservation = (place: string, body: unknown, headers: Record<string, string> = {}) =>
    app().call({ method: 'PUT', url: `/v1/weather/${place}`, headers, body });

  const storedPlace = (place: string) =>
    app().storage.db.selectFrom('places').selectAll().where('place', '=', place).executeTakeFirst();

  return {
    /** A place slug no other test of this file uses (the tests of a file share one database). */
    newPlace(stem = 'place'): string {
      placeSequence++;
      return `${stem}-${placeSequence}`;
    },
    putObservation,
    /** Records an observation through the API (arrange step); returns the reply. */
    async recordObservation(place: string, overrides: Record<string, unknown> = {}) {
      const reply = await putObservation(place, buildObservation(overrides));
      if (reply.status !== 200 && reply.status !== 201)
        throw new Error(`could not record an observation: ${reply.status} ${reply.text}`);
      return reply;
    },
    patchPlace: (place: string, body: unknown, headers: Record<string, string> = {}) =>
      app().call({
        method: 'PATCH',
        url: `/v1/weather/${place}`,
        headers: { ...MERGE_PATCH, ...headers },
        body: JSON.stringify(body),
      }),
    storedPlace,
    /** The place's history as stored, oldest first. */
    async storedObservations(place: string) {
      const row = await storedPlace(place);
      if (!row) return [];
      return app()
        .storage.db.selectFrom('observations')
        .selectAll()
        .where('place_id', '=', row.id)
        .orderBy('observed_at')
        .execute();
    },
    /** Every place and observation row, in id order: what "nothing stored changed" is checked against. */
    async storedWeather() {
      const db = app().storage.db;
      return {
        places: await db.selectFrom('places').selectAll().orderBy('id').execute(),
        observations: await db.selectFrom('observations').selectAll().orderBy('id').execute(),
      };
    },
  };
}
