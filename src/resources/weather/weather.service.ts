import { recordEvent } from '../../outbox/outbox.js';
import { nowTimestamp, toTimestamp } from '../../db/clock.js';
import type { Executor, Measurements, Trx } from '../../db/database.js';
import { deleteAtVersion } from '../../db/versioned.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Page } from '../../http/paging.js';
import { NotFoundError, UnprocessableError, type FieldError } from '../../errors.js';
import type { UpsertCondition, VersionCondition } from '../../http/records.js';
import {
  assertCondition,
  assertMayCreate,
  assertReadOnlyEchoes,
  changedConcurrently,
} from '../../engine/preconditions.js';
import {
  findObservations,
  findPlace,
  findPlaceForUpdate,
  findPlaces,
  insertPlace,
  updatePlaceAtVersion,
  upsertObservation,
  type StoredObservation,
  type StoredPlace,
} from './weather.repository.js';
import {
  FUTURE_TOLERANCE_MS,
  type Observation,
  type ObservationInput,
  type PlacePatch,
  type Weather,
} from './weather.schema.js';

export type { StoredPlace };

/** A place written by PUT or PATCH, and whether that request created it (201). */
export interface PlaceWrite {
  place: StoredPlace;
  created: boolean;
}

/** The place key of a URL segment: places are matched without regard to case. */
export function placeKey(segment: string): string {
  return segment.toLowerCase();
}

export async function getPlace(db: Executor, slug: string): Promise<StoredPlace> {
  const place = await findPlace(db, placeKey(slug));
  if (!place) throw placeNotFound(slug);
  return place;
}

export function listPlaces(db: Executor, query: ListQuery) {
  return findPlaces(db, query);
}

export async function listObservations(db: Executor, slug: string, query: ListQuery): Promise<Page<Observation>> {
  const place = await getPlace(db, slug);
  const page = await findObservations(db, place.id, query);
  return { ...page, rows: page.rows.map((row) => toObservation(place.place, row)) };
}

/**
 * PUT: records an observation, creating the place on first use. The observation always joins
 * the history; it becomes the place's latest only if it is at least as recent as the stored
 * one, so feeds that deliver late or out of order never move the weather back in time.
 */
export async function recordObservation(
  trx: Trx,
  slug: string,
  input: ObservationInput,
  recordedBy: string,
  condition: UpsertCondition,
): Promise<PlaceWrite> {
  const observation = checkObservation(input, recordedBy);
  const { place: stored, created } = await findOrCreatePlace(trx, slug, input, condition, observation);
  assertEchoes(stored, input);
  await upsertObservation(trx, stored.id, observation, nowTimestamp());
  const isLatest = stored.observed_at === null || observation.observed_at >= stored.observed_at;
  const place = created
    ? stored
    : await applyChanges(trx, stored, { ...(isLatest ? observation : {}), ...placeChanges(stored, input) });
  await recordEvent(trx, 'weather.observed', weatherPath(place), { ...presentWeather(place), observation });
  return { place, created };
}

/** PATCH (JSON Merge Patch): name and coordinates; creates the place when there is none yet. */
export async function patchPlace(
  trx: Trx,
  slug: string,
  patch: PlacePatch,
  condition: UpsertCondition,
): Promise<PlaceWrite> {
  const { place: stored, created } = await findOrCreatePlace(trx, slug, patch, condition);
  assertEchoes(stored, patch);
  const place = created ? stored : await applyChanges(trx, stored, placeChanges(stored, patch));
  if (created || place.version !== stored.version)
    await recordEvent(trx, 'weather.updated', weatherPath(place), presentWeather(place));
  return { place, created };
}

/** Deletes the place and its history (the foreign key cascades). */
export async function deletePlace(trx: Trx, slug: string, condition: VersionCondition): Promise<void> {
  const stored = await findPlaceForUpdate(trx, placeKey(slug));
  if (!stored) throw placeNotFound(slug);
  assertCondition(condition, stored.version, `Place ${stored.place}`);
  if (!(await deleteAtVersion(trx, 'places', stored.id, stored.version)))
    throw changedConcurrently(`Place ${stored.place}`);
  await recordEvent(trx, 'weather.deleted', weatherPath(stored), { id: stored.id, place: stored.place });
}

const weatherPath = (place: StoredPlace) => `/v1/weather/${encodeURIComponent(place.place)}`;

/** The stored place as the API shows it, with its latest recorded observation. */
export function presentWeather(place: StoredPlace, stale = false): Weather {
  return {
    id: place.id,
    place: place.place,
    name: place.name,
    latitude: place.latitude,
    longitude: place.longitude,
    temperature_c: place.temperature_c,
    humidity_pct: place.humidity_pct,
    wind_kph: place.wind_kph,
    conditions: place.conditions as Weather['conditions'],
    observed_at: place.observed_at,
    source: place.source,
    stale,
    created_at: place.created_at,
    updated_at: place.updated_at,
  };
}

/** The place, locked; or a new one with the body's fields (and its first observation), at version 1. */
async function findOrCreatePlace(
  trx: Trx,
  slug: string,
  fields: { name?: string; latitude?: number | null; longitude?: number | null },
  condition: UpsertCondition,
  observation?: Measurements,
): Promise<PlaceWrite> {
  const key = placeKey(slug);
  for (let attempt = 0; attempt < 2; attempt++) {
    const stored = await findPlaceForUpdate(trx, key);
    if (stored) {
      assertCondition(condition.allows, stored.version, `Place ${key}`);
      return { place: stored, created: false };
    }
    assertMayCreate(condition, `Place ${key}`);
    assertCoordinatesTogether(fields.latitude ?? null, fields.longitude ?? null, fields);
    const inserted = await insertPlace(trx, {
      place: key,
      name: fields.name ?? key,
      latitude: fields.latitude ?? null,
      longitude: fields.longitude ?? null,
      ...observation,
      now: nowTimestamp(),
    });
    if (inserted) return { place: inserted, created: true };
    // Another request created it between our read and insert: read it again, now locked.
  }
  throw changedConcurrently(`Place ${key}`);
}

/** The fields of the place a body changes (JSON Merge Patch rules: absent keeps, null clears). */
function placeChanges(
  stored: StoredPlace,
  body: { name?: string; latitude?: number | null; longitude?: number | null },
) {
  const latitude = body.latitude === undefined ? stored.latitude : body.latitude;
  const longitude = body.longitude === undefined ? stored.longitude : body.longitude;
  assertCoordinatesTogether(latitude, longitude, body);
  return {
    ...(body.name !== undefined ? { name: body.name } : {}),
    ...(body.latitude !== undefined ? { latitude } : {}),
    ...(body.longitude !== undefined ? { longitude } : {}),
  };
}

/** Writes the changes at the next version; a write that changes nothing keeps the version (and the ETags clients hold). */
async function applyChanges(
  trx: Trx,
  stored: StoredPlace,
  changes: Partial<Measurements> & Partial<Pick<StoredPlace, 'name' | 'latitude' | 'longitude'>>,
): Promise<StoredPlace> {
  const changed = Object.entries(changes).some(([field, value]) => stored[field as keyof StoredPlace] !== value);
  if (!changed) return stored;
  const place = await updatePlaceAtVersion(trx, stored.id, stored.version, { ...changes, now: nowTimestamp() });
  if (!place) throw changedConcurrently(`Place ${stored.place}`);
  return place;
}

/** A place has both coordinates or neither: a latitude alone locates nothing. */
function assertCoordinatesTogether(
  latitude: number | null,
  longitude: number | null,
  body: { latitude?: number | null; longitude?: number | null },
): void {
  if ((latitude === null) === (longitude === null)) return;
  const missing = latitude === null ? 'latitude' : 'longitude';
  const given = missing === 'latitude' ? 'longitude' : 'latitude';
  const pointer = body[missing] === undefined ? given : missing;
  throw new UnprocessableError(
    `latitude and longitude are set (or cleared) together; the place would have ${given} without ${missing}.`,
    [{ in: 'body', pointer: `#/${pointer}`, detail: 'latitude and longitude are set or cleared together' }],
  );
}

/** The rules the schema cannot say: observed_at is a real instant, not ahead of the clock. */
function checkObservation(input: ObservationInput, recordedBy: string): Measurements {
  const observedAt = toTimestamp(input.observed_at);
  const errors: FieldError[] = [];
  if (observedAt === undefined) {
    errors.push({
      in: 'body',
      pointer: '#/observed_at',
      detail: 'must be a valid RFC 3339 date-time with a time zone',
    });
  } else if (Date.parse(observedAt) > Date.now() + FUTURE_TOLERANCE_MS) {
    errors.push({
      in: 'body',
      pointer: '#/observed_at',
      detail: `is ahead of the server's clock (${nowTimestamp()}) by more than 5 minutes`,
    });
  }
  if (errors.length > 0)
    throw new UnprocessableError(`The body is invalid: #/observed_at ${errors[0]!.detail}.`, errors);
  return {
    temperature_c: input.temperature_c,
    humidity_pct: input.humidity_pct,
    wind_kph: input.wind_kph,
    conditions: input.conditions,
    observed_at: observedAt!,
    source: input.source ?? recordedBy.slice(0, 64),
  };
}

/** The rules of writes (docs/conventions.md) for place bodies: id and timestamps as for every record, and `place` naming the path's. */
function assertEchoes(
  stored: StoredPlace,
  body: { place?: string; id?: number; created_at?: string; updated_at?: string },
): void {
  if (body.place !== undefined && placeKey(body.place) !== stored.place) {
    throw new UnprocessableError(
      `The body names place ${body.place}, but the path names ${stored.place}.`,
      [{ in: 'body', pointer: '#/place', detail: 'is read-only and differs from the place in the path' }],
      'read-only-field',
    );
  }
  assertReadOnlyEchoes(stored, body);
}

function toObservation(place: string, row: StoredObservation): Observation {
  return { ...row, place, conditions: row.conditions as Observation['conditions'] };
}

function placeNotFound(slug: string): NotFoundError {
  return new NotFoundError(
    `There is no place ${placeKey(slug)}; PUT an observation or PATCH its coordinates to create it.`,
  );
}
