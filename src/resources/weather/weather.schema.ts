import Type, { type Static, type TSchema } from 'typebox';
import { freeText } from '../../http/free-text.js';
import { CREATED_RANGE_FILTERS, pageSchema, timeBound, type CollectionSpec } from '../../http/paging.js';
import { DisplayName, EchoedReadOnly, RecordFields, Timestamp, closedObject } from '../../http/schemas.js';
import { CONDITIONS, type Condition } from '../../upstream/conditions.js';
import { MEASUREMENT_RANGES } from '../../upstream/ranges.js';

/** How far ahead of rowi's clock an observation may be stamped (clocks of feeds drift). */
export const FUTURE_TOLERANCE_MS = 5 * 60 * 1000;

/**
 * A place in a URL: a slug of letters, digits and hyphens, matched without regard to case
 * (Tokyo is tokyo). Anything else names no place (404), so no path or SQL ever sees it.
 */
export const PLACE_PATTERN = '^[A-Za-z0-9-]{1,64}$';
export const PlaceParams = Type.Object({
  place: Type.String({
    pattern: PLACE_PATTERN,
    description: 'the place: 1–64 letters, digits and hyphens, case-insensitive (tokyo, new-york)',
  }),
});

const Slug = Type.String({
  pattern: '^[a-z0-9-]{1,64}$',
  readOnly: true,
  description: "the place's key in URLs: lower-case letters, digits and hyphens",
});

const Latitude = Type.Number({ minimum: -90, maximum: 90, description: 'degrees north (WGS 84), −90 to 90' });
const Longitude = Type.Number({ minimum: -180, maximum: 180, description: 'degrees east (WGS 84), −180 to 180' });

const CONDITIONS_DESCRIPTION = `what the sky does: ${CONDITIONS.join(', ')}`;
const SOURCE_DESCRIPTION =
  "who measured it: open-meteo for the upstream provider, else the recording feed (the caller's name unless the body names another)";

/** A measurement with its range (ranges.ts), the range written into its description. */
const measurement = (range: { minimum: number; maximum: number }, what: string, note = '') =>
  Type.Number({ ...range, description: `${what}, ${range.minimum} to ${range.maximum}${note}` });

const Measured = {
  temperature_c: measurement(MEASUREMENT_RANGES.temperature_c, 'air temperature, °C'),
  humidity_pct: measurement(MEASUREMENT_RANGES.humidity_pct, 'relative humidity, %'),
  wind_kph: measurement(
    MEASUREMENT_RANGES.wind_kph,
    'wind speed, km/h',
    ' (the strongest gust ever measured was 408 km/h)',
  ),
  conditions: Type.Union(
    CONDITIONS.map((condition) => Type.Literal(condition)),
    { description: CONDITIONS_DESCRIPTION },
  ),
  observed_at: Type.String({
    ...Timestamp,
    description: "when it was measured (RFC 3339); at most 5 minutes ahead of the server's clock",
  }),
};

const Source = freeText({ minLength: 1, maxLength: 64, visible: true, description: SOURCE_DESCRIPTION });

const nullable = <T extends TSchema>(schema: T, description: string) =>
  Type.Union([schema, Type.Null()], { description });
/** A measurement of the place's latest observation: null until there is one. */
const untilFirstObservation = (schema: TSchema & { description?: string }) =>
  nullable(schema, `${schema.description ?? ''}; null before the first observation`);

/** A place and its latest weather: recorded, or from the upstream provider (docs/guide.md "Weather"). */
export const WeatherSchema = Type.Object(
  {
    id: RecordFields.id,
    place: Slug,
    name: DisplayName,
    latitude: nullable(
      Latitude,
      'degrees north; null when the place has no coordinates (then only recorded observations are served)',
    ),
    longitude: nullable(Longitude, 'degrees east; null when the place has no coordinates'),
    temperature_c: untilFirstObservation(Measured.temperature_c),
    humidity_pct: untilFirstObservation(Measured.humidity_pct),
    wind_kph: untilFirstObservation(Measured.wind_kph),
    conditions: Type.Union([...CONDITIONS.map((condition) => Type.Literal(condition)), Type.Null()], {
      description: `${CONDITIONS_DESCRIPTION}; null before the first observation`,
    }),
    observed_at: nullable(
      Type.String({ ...Timestamp, readOnly: true }),
      'when it was measured; null before the first observation',
    ),
    source: nullable(
      Type.String({ readOnly: true }),
      'open-meteo when the upstream provider answered, else the feed that recorded it; null before the first observation',
    ),
    stale: Type.Boolean({
      readOnly: true,
      description:
        'true when the upstream provider failed and rowi served the last value it had instead (stale-if-error; Cache-Status says why)',
    }),
    created_at: RecordFields.created_at,
    updated_at: RecordFields.updated_at,
  },
  closedObject('weather', 'Weather'),
);
// TypeBox cannot infer a union built from a mapped list, so the vocabulary is typed by hand.
export type Weather = Omit<Static<typeof WeatherSchema>, 'conditions'> & { conditions: Condition | null };

/** PUT: one observation, and optionally the place's name and coordinates. */
export const ObservationInputSchema = Type.Object(
  {
    ...Measured,
    source: Type.Optional(Source),
    name: Type.Optional(DisplayName),
    latitude: Type.Optional(Latitude),
    longitude: Type.Optional(Longitude),
    place: Type.Optional(
      Type.String({ maxLength: 64, readOnly: true, description: 'may echo the place; must name the one in the path' }),
    ),
    ...EchoedReadOnly,
  },
  closedObject('weather', 'ObservationInput'),
);
export type ObservationInput = Omit<Static<typeof ObservationInputSchema>, 'conditions'> & { conditions: Condition };

/** PATCH (JSON Merge Patch): the place's own fields; null coordinates stop upstream look-ups. */
export const PlacePatchSchema = Type.Object(
  {
    name: Type.Optional(DisplayName),
    latitude: Type.Optional(
      Type.Union([Latitude, Type.Null()], {
        description: 'degrees north; null removes the coordinates (with longitude)',
      }),
    ),
    longitude: Type.Optional(
      Type.Union([Longitude, Type.Null()], {
        description: 'degrees east; null removes the coordinates (with latitude)',
      }),
    ),
    place: Type.Optional(
      Type.String({ maxLength: 64, readOnly: true, description: 'may echo the place; must name the one in the path' }),
    ),
    ...EchoedReadOnly,
  },
  closedObject('weather', 'PlacePatch'),
);
export type PlacePatch = Static<typeof PlacePatchSchema>;

/** One recorded observation, as the history lists it. */
export const ObservationSchema = Type.Object(
  {
    id: RecordFields.id,
    place: Slug,
    ...Measured,
    source: Type.String({ readOnly: true, description: SOURCE_DESCRIPTION }),
    created_at: RecordFields.created_at,
    updated_at: Type.String({
      ...RecordFields.updated_at,
      description: 'when the observation was last corrected (a PUT with the same observed_at)',
    }),
  },
  closedObject('observation', 'Observation'),
);
export type Observation = Omit<Static<typeof ObservationSchema>, 'conditions'> & { conditions: Condition };

export const WeatherPageSchema = pageSchema(WeatherSchema, 'places');
export const ObservationPageSchema = pageSchema(ObservationSchema, 'observations');

export const PLACE_COLLECTION: CollectionSpec = {
  sortable: { id: 'integer', place: 'string', name: 'string', created_at: 'string', updated_at: 'string' },
  filters: {
    name: { schema: Type.String({ maxLength: 200, description: 'exact name' }), column: 'name', operator: '=' },
    ...CREATED_RANGE_FILTERS,
  },
  defaultSort: 'place',
};

/** History: newest first by default; `observed_after` / `observed_before` bound it in time. */
export const OBSERVATION_COLLECTION: CollectionSpec = {
  sortable: { observed_at: 'string', id: 'integer' },
  filters: {
    observed_after: timeBound('observed_at', 'after', 'observations made'),
    observed_before: timeBound('observed_at', 'before', 'observations made'),
  },
  defaultSort: '-observed_at',
};
