import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyContextConfig,
  FastifyRequest,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
} from 'fastify';
import Type, { type Static, type TSchema } from 'typebox';
import type { RequestContext } from '../auth/context.js';
import { sightOnCollection } from '../auth/visibility.js';
import type { Db, Trx } from '../db/database.js';
import type { ListQuery } from '../db/keyset.js';
import type { Sight } from '../db/visibility.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { IdempotencyHeaders, runIdempotent } from '../http/idempotency.js';
import { answerList, withExports } from '../http/export.js';
import { expandHook } from '../http/expand.js';
import {
  checkedPaths,
  EXPANDABLE_ETAG,
  expandedListing,
  sendExpanded,
  withExpand,
  type Expansion,
} from './reading/expansion.js';
import { fieldsParameter, selectFields } from '../http/fields.js';
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
export interface CollectionDeclaration<Record extends TSchema> {
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
  record: Record;
  page: TSchema;
  /** The path parameters of one record; IdParams unless the resource names its own. */
  params?: typeof IdParams;
  /** Runs after every committed change or delete of a record (callers: forget what this instance believed of callers and keys). */
  afterChange?: () => Promise<void>;
  /** The media types of its representations; JSON and XML unless it says JSON only. */
  formats?: readonly ('json' | 'xml')[];
  /** Its list also answers as an export, in CSV and NDJSON (http/export.ts). */
  exports?: boolean;
}

/** A record as answered: what its schema describes, and the version its ETag comes from. */
export type View<Record extends TSchema> = Static<Record> & { version: number };

/**
 * What a stored record (what the services return) is answered as. A collection whose services
 * return records already as answered needs no `present`; one whose stored records differ (an
 * item's price in minor units, answered as a decimal string) must give it, or the declaration
 * does not compile.
 */
type Presentation<Record extends TSchema, Stored> = [Stored] extends [View<Record>]
  ? { present?: (stored: Stored) => View<Record> }
  : { present: (stored: Stored) => View<Record> };

/**
 * A collection over records answered as `Record` describes, which its services return as
 * `Stored` (by default, as answered).
 */
export type Collection<Record extends TSchema, Stored = View<Record>> = CollectionDeclaration<Record> &
  Presentation<Record, Stored>;

/** The Fastify instance the operations are added to, with request types inferred from their schemas. */
type App = Parameters<FastifyPluginAsyncTypebox>[0];

/**
 * A request body validated by `Body`, as the TypeBox type provider types it: `Static<Body>` in a
 * resource's declaration, and the very type of `request.body` in the operations below, where
 * `Body` is a type parameter that the provider cannot resolve further.
 */
export type Validated<Body extends TSchema> = FastifyRequest<
  RouteGenericInterface,
  RawServerDefault,
  RawRequestDefaultExpression,
  { body: Body },
  TypeBoxTypeProvider
>['body'];

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
}

/** What an operation with a request body declares: its schema, and the check it may run first. */
interface WithBody<Body extends TSchema> {
  body: Body;
  /**
   * Checks the body before the unit of work starts, for a check that waits on something slow
   * (resolving a webhook URL's host), which must not hold the transaction open.
   */
  check?: (body: Validated<Body>) => Promise<void>;
}

/** GET /collection: how a page is read (the records as answered), and the records they may embed. */
export type ListSpec<Record extends TSchema> = Documented & {
  list: (db: Db, query: ListQuery, sight: Sight) => Promise<Page<View<Record>>>;
  expansion?: Expansion<View<Record>>;
};

/** POST /collection: the body, the service function that creates, and what the 201 answers. */
export type CreateSpec<Stored, Body extends TSchema> = Documented &
  WithBody<Body> & {
    summary: string;
    /** The 201's description, when not `Created` (Placed). */
    created?: string;
    /** The record the 201 answers, when it holds more than a read does (a signing secret). */
    createdRecord?: TSchema;
    create: (trx: Trx, body: Validated<Body>, context: RequestContext) => Promise<Stored>;
  };

/** GET /collection/:id: how one record is read, and the records it may embed. */
export type ReadSpec<Record extends TSchema, Stored> = Documented & {
  read: (db: Db, id: number, sight: Sight) => Promise<Stored>;
  expansion?: Expansion<View<Record>>;
};

/** What a PUT or PATCH of a record does: the service function, handed what the request may see and its context. */
export type Write<Body extends TSchema, Stored> = (
  trx: Trx,
  id: number,
  body: Validated<Body>,
  condition: VersionCondition,
  sight: Sight,
  context: RequestContext,
) => Promise<Stored>;

/** PUT or PATCH /collection/:id: the body and the words; the service function is the operation's own `Write`. */
export type WriteSpec<Body extends TSchema> = Documented & WithBody<Body>;

/** DELETE /collection/:id: the service function that deletes. */
export type DeleteSpec = Documented & {
  summary: string;
  remove: (trx: Trx, id: number, condition: VersionCondition, sight: Sight, context: RequestContext) => Promise<void>;
};

const nounOf = (collection: CollectionDeclaration<TSchema>) => collection.singular.toLowerCase();

/** What a PUT or PATCH says of read-only and unknown fields. */
export const READ_ONLY =
  'Read-only fields may be sent only with their stored values (422 read-only-field otherwise); unknown fields are 422.';
/** The two writes of a record by id: the method, the verb of the operation's id, and the summary when it says nothing more. */
const WRITES = {
  replace: {
    method: 'put',
    verb: 'replace',
    summary: (collection: CollectionDeclaration<TSchema>) =>
      `Replace ${collection.article} ${nounOf(collection)}'s writable fields`,
  },
  change: {
    method: 'patch',
    verb: 'patch',
    summary: (collection: CollectionDeclaration<TSchema>) =>
      `Change some fields of ${collection.article} ${nounOf(collection)} (JSON Merge Patch)`,
  },
} as const;
/** What each kind of operation does, for its description when the operation says nothing more (docs/conventions.md). */
const usualDescription = {
  list: (collection: CollectionDeclaration<TSchema>) =>
    `A page of ${collection.name}, in the order \`sort\` asks (comma-separated fields, - for descending; ties by id), at most \`limit\` a page. The next page is at the Link header's rel="next" and the page's \`next\` cursor; filters narrow the list; any other query parameter is 400.`,
  read: (collection: CollectionDeclaration<TSchema>) => `The ${nounOf(collection)} with its ETag. ${CONDITIONAL_READ}`,
  create: (collection: CollectionDeclaration<TSchema>) =>
    `Creates ${collection.article} ${nounOf(collection)}: 201 with it, its Location and ETag. With an Idempotency-Key, repeating the request answers the first answer again (Idempotent-Replayed: true) instead of creating another.`,
  put: (collection: CollectionDeclaration<TSchema>) =>
    `Replaces every writable field of the ${nounOf(collection)}; 200 with it as stored. ${READ_ONLY} ${CONDITIONAL_WRITE}`,
  patch: (collection: CollectionDeclaration<TSchema>) =>
    `JSON Merge Patch (RFC 7396): the fields given change, the others stay; 200 with the ${nounOf(collection)} as stored. ${READ_ONLY} ${CONDITIONAL_WRITE}`,
  delete: (collection: CollectionDeclaration<TSchema>) =>
    `Deletes the ${nounOf(collection)}: 204. ${CONDITIONAL_WRITE}`,
};

/**
 * What every operation's schema says the same way: its id and summary (the operation's own, or
 * the usual ones), the scope of its action on the collection, its description, tag and problems.
 */
function documented(
  collection: CollectionDeclaration<TSchema>,
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
/** The record as answered; without `present`, Presentation made sure the stored record is the view. */
export const presented = <Record extends TSchema, Stored>(collection: Collection<Record, Stored>, stored: Stored) =>
  collection.present ? collection.present(stored) : (stored as View<Record>);

/** What a collection's write operations accept: JSON only, or JSON and XML. */
function consumes(collection: CollectionDeclaration<TSchema>, method: 'post' | 'put' | 'patch') {
  const types = method === 'patch' ? REQUEST_BODY_TYPES.patch : REQUEST_BODY_TYPES.write;
  return collection.formats?.includes('xml') === false ? types.filter((type) => !type.endsWith('/xml')) : types;
}

/** GET /collection: a page, sorted and filtered as the collection allows, with a Link to the next one. */
export function listOperation<Record extends TSchema, Stored>(
  app: App,
  collection: Collection<Record, Stored>,
  spec: ListSpec<Record>,
): void {
  const { db } = app;
  const { expansion } = spec;
  app.get(
    collection.path,
    {
      ...(spec.config ? { config: spec.config } : {}),
      ...(expansion ? { preValidation: expandHook(expansion.relations) } : {}),
      schema: operation({
        ...documented(collection, spec, 'read', {
          operationId: `list${collection.singular}s`,
          summary: `List ${collection.name}`,
          description: usualDescription.list(collection),
        }),
        querystring: expansion
          ? withExpand(listQuerySchema(collection.listing, expansion.selectable), expansion.relations)
          : listQuerySchema(collection.listing, collection),
        response: {
          200: exported(
            collection,
            expansion?.record ?? collection.record,
            representation(
              expansion?.page ?? collection.page,
              `A page of ${collection.name}`,
              RESPONSE_HEADERS.link,
              collection.formats,
            ),
          ),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(collection.listing, request.query);
      const fields = selectFields(expansion?.selectable ?? collection, request.query.fields);
      const sight = sightOnCollection(request.context!.access, collection.name);
      const list = (page: ListQuery) => spec.list(db, page, sight);
      const listing = { name: collection.name, record: collection.record, query, fields, list };
      return answerList(
        request,
        reply,
        expansion ? expandedListing(db, request, expansion, listing) : listing,
        app.config,
      );
    },
  );
}

const exported = (
  collection: CollectionDeclaration<TSchema>,
  record: TSchema,
  response: ReturnType<typeof representation>,
) => (collection.exports === true ? withExports(response, record) : response);

/** POST /collection: creates a record in one unit of work, replayed for a repeated Idempotency-Key; 201 with Location and ETag. */
export function createOperation<Record extends TSchema, Stored extends Versioned, Body extends TSchema>(
  app: App,
  collection: Collection<Record, Stored>,
  spec: CreateSpec<Stored, Body>,
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
      await spec.check?.(request.body);
      const result = await runIdempotent(db, request, request.context!.idempotency, async (trx) => {
        const record = await spec.create(trx, request.body, request.context!);
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
export function readOperation<Record extends TSchema, Stored>(
  app: App,
  collection: Collection<Record, Stored>,
  spec: ReadSpec<Record, Stored>,
): void {
  const { db } = app;
  const { expansion } = spec;
  app.get(
    `${collection.path}/:id`,
    {
      ...(expansion ? { preValidation: expandHook(expansion.relations) } : {}),
      schema: operation({
        ...documented(collection, spec, 'read', {
          operationId: `get${collection.singular}`,
          summary: `Read one ${nounOf(collection)}`,
          description: usualDescription.read(collection),
        }),
        params: collection.params ?? IdParams,
        querystring: expansion
          ? withExpand(Type.Object({ fields: fieldsParameter(expansion.selectable) }), expansion.relations)
          : Type.Object({ fields: fieldsParameter(collection) }),
        headers: IfNoneMatchHeaders,
        response: {
          200: representation(
            expansion?.record ?? collection.record,
            `The ${nounOf(collection)}`,
            expansion ? EXPANDABLE_ETAG : RESPONSE_HEADERS.etag,
            collection.formats,
          ),
          304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag),
        },
      }),
    },
    async (request, reply) => {
      const fields = selectFields(expansion?.selectable ?? collection, request.query.fields);
      const paths = expansion ? checkedPaths(request, expansion, fields) : undefined;
      const sight = sightOnCollection(request.context!.access, collection.name);
      const record = presented(collection, await spec.read(db, request.params.id, sight));
      if (!expansion || !paths) return sendRecord(request, reply, record, 200, fields);
      return sendExpanded(db, request, reply, expansion, record, paths, fields);
    },
  );
}

/**
 * PUT /collection/:id replaces the writable fields; PATCH, a JSON Merge Patch (or a partial JSON or
 * XML body), changes some. Both are checked against If-Match.
 */
export function writeOperation<Record extends TSchema, Stored, Body extends TSchema>(
  app: App,
  collection: Collection<Record, Stored>,
  kind: 'replace' | 'change',
  spec: WriteSpec<Body>,
  write: Write<Body, Stored>,
): void {
  const { db } = app;
  const { method, verb, summary } = WRITES[kind];
  app[method](
    `${collection.path}/:id`,
    {
      schema: operation({
        ...documented(collection, spec, 'update', {
          operationId: `${verb}${collection.singular}`,
          summary: summary(collection),
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
      const { id } = request.params;
      await spec.check?.(request.body);
      const context = request.context!;
      const sight = sightOnCollection(context.access, collection.name);
      const stored = await unitOfWork(db, (trx) => write(trx, id, request.body, conditionOf(request), sight, context));
      await collection.afterChange?.();
      return sendRecord(request, reply, presented(collection, stored));
    },
  );
}

/** DELETE /collection/:id: 204, checked against If-Match. */
export function deleteOperation<Record extends TSchema, Stored>(
  app: App,
  collection: Collection<Record, Stored>,
  spec: DeleteSpec,
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
      const { id } = request.params;
      const context = request.context!;
      const sight = sightOnCollection(context.access, collection.name);
      await unitOfWork(db, (trx) => spec.remove(trx, id, conditionOf(request), sight, context));
      await collection.afterChange?.();
      return sendEmpty(reply, 204);
    },
  );
}
