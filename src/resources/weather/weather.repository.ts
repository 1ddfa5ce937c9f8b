import type { Executor, Measurements, ObservationRow, PlaceRow } from '../../db/database.js';
import { compiledQuery } from '../../db/compiled.js';
import { isSqlite } from '../../db/dialect.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';
import { updateAtVersion } from '../../db/versioned.js';

export type StoredPlace = PlaceRow;

const OBSERVATION_COLUMNS = [
  'id',
  'temperature_c',
  'humidity_pct',
  'wind_kph',
  'conditions',
  'observed_at',
  'source',
  'created_at',
  'updated_at',
] as const;
export type StoredObservation = Pick<ObservationRow, (typeof OBSERVATION_COLUMNS)[number]>;

// Every read of a place's weather starts here: compiled once, like the other reads by key.
const selectPlace = compiledQuery((db, place: string) =>
  db.selectFrom('places').selectAll().where('place', '=', place),
);

export async function findPlace(db: Executor, place: string): Promise<StoredPlace | undefined> {
  const [row] = await selectPlace(db, place);
  return row;
}

/**
 * The place, locked until the transaction ends on PostgreSQL, so two observations of one place
 * decide "which is the latest" one after the other. SQLite's write transaction already holds
 * the only write lock.
 */
export async function findPlaceForUpdate(db: Executor, place: string): Promise<StoredPlace | undefined> {
  const query = db.selectFrom('places').selectAll().where('place', '=', place);
  return (isSqlite(db) ? query : query.forUpdate()).executeTakeFirst();
}

export function findPlaces(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('places').selectAll(), query);
}

export function findObservations(db: Executor, placeId: number, query: ListQuery) {
  const conditions = [{ column: 'place_id', operator: '=' as const, value: placeId }, ...query.conditions];
  return fetchPage(db.selectFrom('observations').select(OBSERVATION_COLUMNS), { ...query, conditions });
}

/** Inserts the place, or returns undefined when another request created it first. */
export async function insertPlace(
  db: Executor,
  place: {
    place: string;
    name: string;
    latitude: number | null;
    longitude: number | null;
    now: string;
  } & Partial<Measurements>,
): Promise<StoredPlace | undefined> {
  const { now, ...fields } = place;
  return db
    .insertInto('places')
    .values({ ...fields, version: 1, created_at: now, updated_at: now })
    .onConflict((conflict) => conflict.column('place').doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** Writes the place's fields if it is still at `version`; undefined when it is not. */
export function updatePlaceAtVersion(
  db: Executor,
  id: number,
  version: number,
  changes: Partial<Pick<PlaceRow, 'name' | 'latitude' | 'longitude'> & Measurements> & { now: string },
): Promise<StoredPlace | undefined> {
  const { now, ...fields } = changes;
  return updateAtVersion(db, 'places', id, version, fields, now);
}

/** Records an observation; one of the same place and instant is corrected instead (PUT is idempotent). */
export async function upsertObservation(
  db: Executor,
  placeId: number,
  observation: Measurements,
  now: string,
): Promise<Pick<ObservationRow, 'id'>> {
  const { observed_at: _instant, ...values } = observation;
  return db
    .insertInto('observations')
    .values({ place_id: placeId, ...observation, created_at: now, updated_at: now })
    .onConflict((conflict) => conflict.columns(['place_id', 'observed_at']).doUpdateSet({ ...values, updated_at: now }))
    .returning('id')
    .executeTakeFirstOrThrow();
}
