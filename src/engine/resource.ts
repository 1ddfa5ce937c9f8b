import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static, TObject, TSchema } from 'typebox';
import type { RequestContext } from '../auth/context.js';
import { declareDataResource, type DataResourceDeclaration } from '../auth/policy.js';
import { creatorOf } from '../auth/visibility.js';
import { declareProblemTypes, type ProblemTypeRule } from '../errors.js';
import { declareEventTypes, type EventTypeRule } from '../outbox/event-types.js';
import { createEntries, deleteEntries, writeEntries } from './batches/actions.js';
import { batchOperation } from './batches/batch.js';
import {
  changeOperation,
  createOperation,
  deleteOperation,
  listOperation,
  readOperation,
  replaceOperation,
  presented,
  type Collection,
  type View,
} from './collection.js';
import type { Page } from '../http/paging.js';
import type { ImportTarget } from './imports/target.js';
import type { RecordService, StoredRecord } from './records.js';

/**
 * A resource as the app takes one declared beside its own (app.ts `resources`): its place in the
 * access rules, its event types, the plugin that adds its operations, and its import when it has
 * one. The app declares its access and events when it is built and undoes them when it closes.
 */
export interface ResourceModule {
  /** Its name and record rules (auth/policy.ts declareDataResource): scopes, owned records, acting. */
  access: { name: string } & DataResourceDeclaration;
  /** The event types its writes record (outbox/event-types.ts declareEventTypes). */
  events: Record<string, EventTypeRule>;
  /** Problem types of its own (errors.ts declareProblemTypes), named in code with declaredProblem. */
  problems?: Record<string, ProblemTypeRule>;
  routes: FastifyPluginAsyncTypebox;
  import?: ImportTarget;
}

/**
 * Declares what the resources add to the catalogues of scopes, owned tables, event and problem types, before
 * the routes whose schemas list them are added (per process: the catalogues are module state).
 * Returns what undoes every declaration, and undoes what it did itself when one is refused.
 */
export function declareResources(resources: readonly ResourceModule[]): () => void {
  const undo: (() => void)[] = [];
  const undoAll = () => {
    for (const step of undo.splice(0).reverse()) step();
  };
  try {
    for (const { access, events, problems = {} } of resources) {
      const { name, ...rule } = access;
      undo.push(declareDataResource(name, rule));
      undo.push(declareEventTypes(events));
      undo.push(declareProblemTypes(problems));
    }
  } catch (error) {
    undoAll();
    throw error;
  }
  return undoAll;
}

/** The Fastify instance a resource's routes are added to. */
type App = Parameters<FastifyPluginAsyncTypebox>[0];

/**
 * A resource of versioned records with an owner, declared once (docs/architecture.md "Adding a
 * resource"): where it lives and what its records look like (the collection), how they are stored
 * (the rules: table, columns, writable fields, natural key, events), the bodies its writes take, and
 * the few words its documentation says beyond the usual. From it come the service functions and
 * every operation: list (with its filters, `?id=`, `fields` and the exports), read with its ETag,
 * create with Idempotency-Key, replace and change against If-Match, delete, and the batch; each
 * deciding what the request sees and owns by its access, in the OpenAPI document as it validates.
 */
export interface ResourceDeclaration<
  Record extends TSchema,
  Stored extends StoredRecord,
  Create extends TObject,
  Replace extends TObject,
  Patch extends TObject,
> {
  collection: Collection<Record, Stored>;
  /** Its records' service (engine/records.ts recordService), from the rules of how they are stored. */
  service: RecordService<Stored, Static<Create>>;
  create: { body: Create; summary: string };
  replace: Replace;
  patch: Patch;
  remove: { summary: string };
  /** What the batch's description says beyond the usual (what a create does besides, the keys two entries may not share). */
  batch: { description: string };
  /** Operations of the resource's own, added after create (a user's /me). */
  routes?: (app: App, service: RecordService<Stored, Static<Create>>) => void;
}

/** The Fastify plugin that adds the declared resource's operations. */
export function resourceRoutes<
  Record extends TSchema,
  Stored extends StoredRecord,
  Create extends TObject,
  Replace extends TObject,
  Patch extends TObject,
>(declaration: ResourceDeclaration<Record, Stored, Create, Replace, Patch>): FastifyPluginAsyncTypebox {
  type Body = Static<Create>;
  const { collection, service } = declaration;
  const create = (trx: Parameters<typeof service.create>[0], body: Body, context: RequestContext) =>
    service.create(trx, body, creatorOf(context.access, collection.name));
  const unique = service.rules.unique;
  // Two entries of a batch may not name one record, by id or by its natural key.
  const keyOf = (entry: object) => {
    if (unique === undefined) return [];
    const value = (entry as { [field: string]: unknown })[unique.field];
    return value === undefined ? [] : [`${unique.field}:${unique.key ? unique.key(String(value)) : String(value)}`];
  };

  return async (app) => {
    listOperation(app, collection, {
      list: async (db, query, sight) => {
        const page = await service.list(db, query, sight);
        if (!collection.present) return page as Page<View<Record>>;
        return { ...page, rows: page.rows.map((stored) => presented(collection, stored)) };
      },
    });
    createOperation(app, collection, {
      summary: declaration.create.summary,
      body: declaration.create.body,
      create: (trx, body, context) => create(trx, body as Body, context),
    });
    declaration.routes?.(app, service);
    readOperation(app, collection, { read: service.get });
    replaceOperation(app, collection, {
      body: declaration.replace,
      replace: (trx, id, body, condition, sight) => service.replace(trx, id, body as Body, condition, sight),
    });
    changeOperation(app, collection, {
      body: declaration.patch,
      change: (trx, id, body, condition, sight) => service.patch(trx, id, body as Partial<Body>, condition, sight),
    });
    deleteOperation(app, collection, { summary: declaration.remove.summary, remove: service.remove });
    batchOperation(app, {
      path: collection.path,
      resource: collection.name,
      singular: collection.singular,
      record: collection.record,
      permission: `${collection.name}:update`,
      description: declaration.batch.description,
      actions: [
        createEntries(collection, declaration.create.body, (trx, body, context) => create(trx, body, context), keyOf),
        writeEntries(
          collection,
          'replace',
          declaration.replace,
          (trx, id, body, condition, sight) => service.replace(trx, id, body as Body, condition, sight),
          (entry) => [`id:${entry.id}`, ...keyOf(entry)],
        ),
        writeEntries(
          collection,
          'change',
          declaration.patch,
          (trx, id, body, condition, sight) => service.patch(trx, id, body as Partial<Body>, condition, sight),
          (entry) => [`id:${entry.id}`, ...keyOf(entry)],
        ),
        deleteEntries(collection, service.remove),
      ],
    });
  };
}
