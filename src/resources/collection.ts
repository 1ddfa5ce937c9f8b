import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import type { Static, TSchema } from 'typebox';
import { sightOnCollection } from '../auth/visibility.js';
import type { Db, Trx } from '../db/database.js';
import type { ListQuery } from '../db/keyset.js';
import type { Sight } from '../db/visibility.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { IdempotencyHeaders, runIdempotent } from '../http/idempotency.js';
import { answerList, withExports } from '../http/export.js';
import { listQuerySchema, parseListQuery, type CollectionSpec, type Page } from '../http/paging.js';
import { conditionOf, sendCreated, sendEmpty, sendRecord, type VersionCondition } from '../http/records.js';
import {
  CONDITIONAL_READ,
  CONDITIONAL_WRITE,
  IdParams,
  IfMatchHeaders,
  IfNoneMatchHeaders,
  REQUEST_BODY_TYPES,
  RESPONSE_HEADERS,
  noContent,
  operation,
  representation,
} from '../http/schemas.js';

/**
 * The operations of a collection of versioned records (list, read, create, replace, change,
 * delete), built once: a resource declares where it lives and what its records look like, and
 * passes each operation the service function that does the work and what its documentation says
 * beyond the usual. What every one of them does the same way is here: the permission its
 * method needs, paging and its Link header, the ETag of every record and 304 on a current copy,
 * Idempotency-Key on create with Location, If-Match turned into the condition the service checks
 * before it writes, the unit of work every write runs in, and the problems each can answer. And
 * which records the request may see (auth/visibility.ts): every operation on an owned resource
 * hands its service the request's Sight, which every query of the record composes with, so a
 * record the caller may not see is 404 on every path, conditional requests included.
 */
export interface Collection {
  /** Where the collection lives; each record at `${path}/:id`. */
  path: string;
  /** The scopes' resource (`users` → users:read, users:create, …) and the operations' tag. */
  name: string;
  /** The record's name: `User` in operation ids (getUser), `user` in summaries. */
  singular: string;
  /** The article before it in summaries (the sound decides: an item, a user). */
  article: 'a' | 'an';
  /** How the collection is paged, sorted and filtered. */
  listing: CollectionSpec;
  /** A record, and a page of them, as answered. */
  record: TSchema;
  page: TSchema;
  /** The path parameters of one record; IdParams unless the resource names its own. */
  params?: TSchema;
  /** What a stored record is answered as (the default: as it is). */
  present?: (stored: never) => unknown;
  /** Runs after every committed change or delete of a record (callers: forget what this instance believed of callers and keys). */
  afterChange?: () => Promise<void>;
  /** The media types of its representations; JSON and XML unless it says JSON only. */
  formats?: readonly ('json' | 'xml')[];
  /** Its list also answers as an export, in CSV and NDJSON (http/export.ts). */
  exports?: boolean;
}

interface Versioned {
  id: number;
  version: number;
}

interface Documented {
  /** The operation's summary, when it says more than the usual one. */
  summary?: string;
  description?: string;
  /** Problem statuses beyond those the declaration implies (409 on a conflict, 412 with If-Match). */
  problems?: number[];
  /** The operation's id, when not the usual verb and the record's name (placeOrder). */
  operationId?: string;
  /** What the route declares to the plugins (a rate-limit budget). */
  config?: FastifyContextConfig;
  /**
   * Checks the body before the unit of work starts, for a check that waits on something slow
   * (resolving a webhook URL's host), which must not hold the transaction open.
   */
  check?: (body: never) => Promise<void>;
}

const nounOf = (collection: Collection) => collection.singular.toLowerCase();

/** What each kind of operation does, for its description when the operation says nothing more (docs/guide.md "Conventions"). */
/** What a PUT or PATCH says of read-only and unknown fields. */
export const READ_ONLY =
  'Read-only fields may be sent only with their stored values (422 read-only-field otherwise); unknown fields are 422.';
const usualDescription = {
  list: (collection: Collection) =>
    `A page of ${collection.name}, in the order \`sort\` asks (comma-separated fields, - for descending; ties by id), at most \`limit\` a page. The next page is at the Link header's rel="next" and the page's \`next\` cursor; filters narrow the list; any other query parameter is 400.`,
  read: (collection: Collection) => `The ${nounOf(collection)} with its ETag. ${CONDITIONAL_READ}`,
  create: (collection: Collection) =>
    `Creates ${collection.article} ${nounOf(collection)}: 201 with it, its Location and ETag. With an Idempotency-Key, repeating the request answers the first answer again (Idempotent-Replayed: true) instead of creating another.`,
  put: (collection: Collection) =>
    `Replaces every writable field of the ${nounOf(collection)}; 200 with it as stored. ${READ_ONLY} ${CONDITIONAL_WRITE}`,
  patch: (collection: Collection) =>
    `JSON Merge Patch (RFC 7396): the fields given change, the others stay; 200 with the ${nounOf(collection)} as stored. ${READ_ONLY} ${CONDITIONAL_WRITE}`,
  delete: (collection: Collection) => `Deletes the ${nounOf(collection)}: 204. ${CONDITIONAL_WRITE}`,
};

/**
 * What every operation's schema says the same way: its id and summary (the operation's own, or
 * the usual ones), the scope of its action on the collection, its description, tag and problems.
 */
function documented(
  collection: Collection,
  spec: Documented,
  action: 'read' | 'create' | 'update' | 'delete',
  usual: { operationId: string; summary: string; description: string; problems?: number[] },
) {
  const problems = spec.problems ?? usual.problems;
  return {
    operationId: spec.operationId ?? usual.operationId,
    permission: `${collection.name}:${action}` as const,
    summary: spec.summary ?? usual.summary,
    description: spec.description ?? usual.description,
    tags: [collection.name],
    ...(problems ? { problems } : {}),
  };
}
const presented = (collection: Collection, stored: unknown) =>
  collection.present ? collection.present(stored as never) : stored;

/** What a collection's write operations accept: JSON only, or JSON and XML. */
function consumes(collection: Collection, method: 'post' | 'put' | 'patch') {
  const types = method === 'patch' ? REQUEST_BODY_TYPES.patch : REQUEST_BODY_TYPES.write;
  return collection.formats?.includes('xml') === false ? types.filter((type) => !type.endsWith('/xml')) : types;
}

/** GET /collection: a page, sorted and filtered as the collection allows, with a Link to the next one. */
export function listOperation<Row>(
  app: FastifyInstance,
  collection: Collection,
  spec: Documented & { list: (db: Db, query: ListQuery, sight: Sight) => Promise<Page<Row>> },
): void {
  const { db } = app;
  app.get(
    collection.path,
    {
      ...(spec.config ? { config: spec.config } : {}),
      schema: operation({
        ...documented(collection, spec, 'read', {
          operationId: `list${collection.singular}s`,
          summary: `List ${collection.name}`,
          description: usualDescription.list(collection),
        }),
        querystring: listQuerySchema(collection.listing),
        response: {
          200: exported(
            collection,
            representation(collection.page, `A page of ${collection.name}`, RESPONSE_HEADERS.link, collection.formats),
          ),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(collection.listing, request.query as Record<string, unknown>);
      const sight = sightOnCollection(request.principal, collection.name);
      const listing = { name: collection.name, record: collection.record, query };
      return answerList(request, reply, { ...listing, list: (page) => spec.list(db, page, sight) }, app.config);
    },
  );
}

const exported = (collection: Collection, response: ReturnType<typeof representation>) =>
  collection.exports === true ? withExports(response, collection.record) : response;

/** POST /collection: creates a record in one unit of work, replayed for a repeated Idempotency-Key; 201 with Location and ETag. */
export function createOperation<Body extends TSchema>(
  app: FastifyInstance,
  collection: Collection,
  spec: Documented & {
    body: Body;
    summary: string;
    created?: string;
    createdRecord?: TSchema;
    create: (trx: Trx, body: Static<Body>, request: FastifyRequest) => Promise<Versioned>;
  },
): void {
  const { db } = app;
  app.post(
    collection.path,
    {
      ...(spec.config ? { config: spec.config } : {}),
      schema: operation({
        ...documented(collection, spec, 'create', {
          operationId: `create${collection.singular}`,
          summary: spec.summary,
          description: usualDescription.create(collection),
          problems: [409],
        }),
        headers: IdempotencyHeaders,
        body: spec.body,
        consumes: consumes(collection, 'post'),
        response: {
          201: representation(
            spec.createdRecord ?? collection.record,
            spec.created ?? 'Created',
            { ...RESPONSE_HEADERS.location, ...RESPONSE_HEADERS.etag, ...RESPONSE_HEADERS.replayed },
            collection.formats,
          ),
        },
      }),
    },
    async (request, reply) => {
      await spec.check?.(request.body as never);
      const result = await runIdempotent(db, request, async (trx) => {
        const record = await spec.create(trx, request.body as Static<Body>, request);
        return {
          status: 201,
          body: presented(collection, record),
          location: `${collection.path}/${record.id}`,
          version: record.version,
        };
      });
      return sendCreated(request, reply, result);
    },
  );
}

/** GET /collection/:id: the record with its ETag, or 304 when the client's copy is current. */
export function readOperation(
  app: FastifyInstance,
  collection: Collection,
  spec: Documented & { read: (db: Db, id: number, sight: Sight) => Promise<{ version: number }> },
): void {
  const { db } = app;
  app.get(
    `${collection.path}/:id`,
    {
      schema: operation({
        ...documented(collection, spec, 'read', {
          operationId: `get${collection.singular}`,
          summary: `Read one ${nounOf(collection)}`,
          description: usualDescription.read(collection),
        }),
        params: collection.params ?? IdParams,
        headers: IfNoneMatchHeaders,
        response: {
          200: representation(
            collection.record,
            `The ${nounOf(collection)}`,
            RESPONSE_HEADERS.etag,
            collection.formats,
          ),
          304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag),
        },
      }),
    },
    async (request, reply) => {
      const sight = sightOnCollection(request.principal, collection.name);
      const stored = await spec.read(db, (request.params as { id: number }).id, sight);
      return sendRecord(request, reply, presented(collection, stored) as { version: number });
    },
  );
}

type Write<Body extends TSchema> = (
  trx: Trx,
  id: number,
  body: Static<Body>,
  condition: VersionCondition,
  sight: Sight,
  request: FastifyRequest,
) => Promise<{ version: number }>;

/** PUT /collection/:id: replaces the writable fields, checked against If-Match. */
export function replaceOperation<Body extends TSchema>(
  app: FastifyInstance,
  collection: Collection,
  spec: Documented & { body: Body; replace: Write<Body> },
): void {
  writeOperation(
    app,
    collection,
    'put',
    spec,
    spec.replace,
    spec.summary ?? `Replace ${collection.article} ${nounOf(collection)}'s writable fields`,
  );
}

/** PATCH /collection/:id: a JSON Merge Patch (or a partial JSON or XML body), checked against If-Match. */
export function changeOperation<Body extends TSchema>(
  app: FastifyInstance,
  collection: Collection,
  spec: Documented & { body: Body; change: Write<Body> },
): void {
  writeOperation(
    app,
    collection,
    'patch',
    spec,
    spec.change,
    spec.summary ?? `Change some fields of ${collection.article} ${nounOf(collection)} (JSON Merge Patch)`,
  );
}

function writeOperation<Body extends TSchema>(
  app: FastifyInstance,
  collection: Collection,
  method: 'put' | 'patch',
  spec: Documented & { body: Body },
  write: Write<Body>,
  summary: string,
): void {
  const { db } = app;
  app[method](
    `${collection.path}/:id`,
    {
      schema: operation({
        ...documented(collection, spec, 'update', {
          operationId: `${method === 'put' ? 'replace' : 'patch'}${collection.singular}`,
          summary,
          description: usualDescription[method](collection),
          problems: [409, 412],
        }),
        params: collection.params ?? IdParams,
        headers: IfMatchHeaders,
        body: spec.body,
        consumes: consumes(collection, method),
        response: {
          200: representation(
            collection.record,
            `The ${nounOf(collection)} as stored`,
            RESPONSE_HEADERS.etag,
            collection.formats,
          ),
        },
      }),
    },
    async (request, reply) => {
      const id = (request.params as { id: number }).id;
      await spec.check?.(request.body as never);
      const sight = sightOnCollection(request.principal, collection.name);
      const stored = await unitOfWork(db, (trx) =>
        write(trx, id, request.body as Static<Body>, conditionOf(request), sight, request),
      );
      await collection.afterChange?.();
      return sendRecord(request, reply, presented(collection, stored) as { version: number });
    },
  );
}

/** DELETE /collection/:id: 204, checked against If-Match. */
export function deleteOperation(
  app: FastifyInstance,
  collection: Collection,
  spec: Documented & {
    summary: string;
    remove: (trx: Trx, id: number, condition: VersionCondition, sight: Sight, request: FastifyRequest) => Promise<void>;
  },
): void {
  const { db } = app;
  app.delete(
    `${collection.path}/:id`,
    {
      schema: operation({
        ...documented(collection, spec, 'delete', {
          operationId: `delete${collection.singular}`,
          summary: spec.summary,
          description: usualDescription.delete(collection),
          problems: [409, 412],
        }),
        params: collection.params ?? IdParams,
        headers: IfMatchHeaders,
        response: { 204: noContent('Deleted') },
      }),
    },
    async (request, reply) => {
      const id = (request.params as { id: number }).id;
      const sight = sightOnCollection(request.principal, collection.name);
      await unitOfWork(db, (trx) => spec.remove(trx, id, conditionOf(request), sight, request));
      await collection.afterChange?.();
      return sendEmpty(reply, 204);
    },
  );
}
