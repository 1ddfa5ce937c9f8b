import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { entityTag } from '../../http/etag.js';
import { fieldsParameter, selectFields, type FieldSelection } from '../../http/fields.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { conditionOf, sendEmpty, sendRecord, sendTagged, upsertConditionOf } from '../../http/records.js';
import {
  CONDITIONAL_WRITE,
  IfMatchHeaders,
  IfNoneMatchHeaders,
  REQUEST_BODY_TYPES,
  RESPONSE_HEADERS,
  noContent,
  operation,
  representation,
} from '../../http/schemas.js';
import { REVALIDATE, readCurrentWeather, type WeatherReading } from './current-weather.js';
import {
  OBSERVATION_COLLECTION,
  ObservationInputSchema,
  ObservationPageSchema,
  PLACE_COLLECTION,
  PlaceParams,
  PlacePatchSchema,
  WeatherPageSchema,
  ObservationSchema,
  WeatherSchema,
} from './weather.schema.js';
import {
  deletePlace,
  listObservations,
  listPlaces,
  patchPlace,
  recordObservation,
  presentWeather,
  type PlaceWrite,
} from './weather.service.js';
import { unitOfWork } from '../../db/unit-of-work.js';

/**
 * The headers of a page of recorded weather: its links, and its freshness. Lists show recorded
 * weather only, which any PUT can change: reuse only after asking again.
 */
const RECORDED_PAGE_HEADERS = {
  ...RESPONSE_HEADERS.link,
  'Cache-Control': RESPONSE_HEADERS.cache['Cache-Control'],
  Age: RESPONSE_HEADERS.cache.Age,
};

/** /v1/weather: places, their latest weather (recorded or from the upstream provider) and history. */
const weatherRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;

  app.get(
    '/v1/weather',
    {
      schema: operation({
        operationId: 'listPlaces',
        permission: 'weather:read',
        summary: 'List places with their latest recorded weather',
        description:
          'The provider is not asked here (one page could mean 500 calls): read one place for its current weather.',
        tags: ['weather'],
        querystring: listQuerySchema(PLACE_COLLECTION, { record: WeatherSchema }),
        response: {
          200: representation(
            WeatherPageSchema,
            'A page of places, by place unless sorted otherwise',
            RECORDED_PAGE_HEADERS,
          ),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(PLACE_COLLECTION, request.query);
      const fields = selectFields({ record: WeatherSchema }, request.query.fields);
      const page = await listPlaces(db, query);
      const rows = page.rows.map((place) => presentWeather(place));
      return sendPage(request, revalidate(reply), { ...page, rows }, query, fields);
    },
  );

  app.get(
    '/v1/weather/:place',
    {
      schema: operation({
        operationId: 'getWeather',
        permission: 'weather:read',
        summary: 'Read the latest weather of a place',
        description:
          "The newest of the latest recorded observation and, when a provider is configured and the place has coordinates, the provider's current weather (cached). " +
          'When the provider fails, the last value rowi has is served with stale: true; with none, 502 or 504.',
        tags: ['weather'],
        params: PlaceParams,
        querystring: Type.Object({ fields: fieldsParameter({ record: WeatherSchema }) }),
        headers: IfNoneMatchHeaders,
        response: {
          200: representation(WeatherSchema, 'The place and its latest weather', {
            ...RESPONSE_HEADERS.etag,
            ...RESPONSE_HEADERS.cache,
          }),
          304: noContent('The copy the client holds is current', {
            ...RESPONSE_HEADERS.etag,
            ...RESPONSE_HEADERS.cache,
          }),
        },
        problems: [502, 504],
      }),
    },
    async (request, reply) => {
      const fields = selectFields({ record: WeatherSchema }, request.query.fields);
      const reading = await readCurrentWeather(db, app.weather, request.params.place);
      return sendCurrentWeather(request, reply, reading, fields);
    },
  );

  app.put(
    '/v1/weather/:place',
    {
      schema: operation({
        operationId: 'recordObservation',
        permission: 'weather:update',
        summary: 'Record an observation of a place (weather feeds)',
        description:
          "Creates the place on first use (201). The observation joins the history; it becomes the place's latest weather unless a more recent one is stored. " +
          'The same observed_at again corrects that observation (PUT is idempotent).',
        tags: ['weather'],
        params: PlaceParams,
        headers: IfMatchHeaders,
        body: ObservationInputSchema,
        response: {
          200: representation(
            WeatherSchema,
            'The place as stored, with its latest recorded weather',
            RESPONSE_HEADERS.etag,
          ),
          201: representation(WeatherSchema, 'The place was created', {
            ...RESPONSE_HEADERS.location,
            ...RESPONSE_HEADERS.etag,
          }),
        },
        problems: [412],
      }),
    },
    async (request, reply) => {
      const recordedBy = request.context?.access.name ?? 'anonymous';
      const result = await unitOfWork(db, (trx) =>
        recordObservation(trx, request.params.place, request.body, recordedBy, upsertConditionOf(request)),
      );
      return sendPlaceWrite(request, reply, result);
    },
  );

  app.patch(
    '/v1/weather/:place',
    {
      schema: operation({
        operationId: 'patchPlace',
        permission: 'weather:update',
        summary: "Set a place's name or coordinates (JSON Merge Patch); creates the place when there is none",
        description:
          'Sets `name`, `latitude` and `longitude` (null clears the coordinates). 200 with the place as stored, or 201 with Location when the place did not exist. ' +
          CONDITIONAL_WRITE,
        tags: ['weather'],
        params: PlaceParams,
        headers: IfMatchHeaders,
        body: PlacePatchSchema,
        consumes: REQUEST_BODY_TYPES.patch,
        response: {
          200: representation(WeatherSchema, 'The place as stored', RESPONSE_HEADERS.etag),
          201: representation(WeatherSchema, 'The place was created', {
            ...RESPONSE_HEADERS.location,
            ...RESPONSE_HEADERS.etag,
          }),
        },
        problems: [412],
      }),
    },
    async (request, reply) => {
      const result = await unitOfWork(db, (trx) =>
        patchPlace(trx, request.params.place, request.body, upsertConditionOf(request)),
      );
      return sendPlaceWrite(request, reply, result);
    },
  );

  app.delete(
    '/v1/weather/:place',
    {
      schema: operation({
        operationId: 'deletePlace',
        permission: 'weather:delete',
        summary: 'Delete a place and its history',
        description: `Deletes the place and every observation recorded of it: 204. ${CONDITIONAL_WRITE}`,
        tags: ['weather'],
        params: PlaceParams,
        headers: IfMatchHeaders,
        response: { 204: noContent('Deleted') },
        problems: [412],
      }),
    },
    async (request, reply) => {
      await unitOfWork(db, (trx) => deletePlace(trx, request.params.place, conditionOf(request)));
      return sendEmpty(reply, 204);
    },
  );

  app.get(
    '/v1/weather/:place/observations',
    {
      schema: operation({
        operationId: 'listObservations',
        permission: 'weather:read',
        summary: "List a place's recorded observations, newest first",
        description:
          "A page of the observations recorded of the place (PUT /v1/weather/{place}), newest first; `sort=observed_at` for oldest first; filters `observed_after` and `observed_before`. The provider's readings are not recorded here.",
        tags: ['weather'],
        params: PlaceParams,
        querystring: listQuerySchema(OBSERVATION_COLLECTION, { record: ObservationSchema }),
        response: {
          200: representation(ObservationPageSchema, 'A page of observations', RECORDED_PAGE_HEADERS),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(OBSERVATION_COLLECTION, request.query);
      const fields = selectFields({ record: ObservationSchema }, request.query.fields);
      const page = await listObservations(db, request.params.place, query);
      return sendPage(request, revalidate(reply), page, query, fields);
    },
  );
};

export default weatherRoutes;

function revalidate(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', REVALIDATE).header('age', '0');
}

function sendPlaceWrite(request: FastifyRequest, reply: FastifyReply, { place, created }: PlaceWrite) {
  if (created) reply.header('location', `/v1/weather/${place.place}`);
  return sendRecord(request, reply, { ...presentWeather(place), version: place.version }, created ? 201 : 200);
}

/** The weather with the headers that say how fresh it is; 304 when the client's copy is current. */
function sendCurrentWeather(
  request: FastifyRequest,
  reply: FastifyReply,
  { weather, freshness }: WeatherReading,
  fields: FieldSelection | undefined,
) {
  reply.header('cache-control', freshness.cacheControl).header('age', String(freshness.age));
  if (freshness.cacheStatus !== undefined) reply.header('cache-status', freshness.cacheStatus);
  const etag = entityTag(freshness.etag.opaque, request.format, freshness.etag.weak, fields);
  return sendTagged(request, reply, weather, etag, 200, fields);
}
