import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static, TObject, TSchema } from 'typebox';
import { declareDataResource, type DataResourceDeclaration } from '../auth/policy.js';
import { creatorOf } from '../auth/visibility.js';
import { declareProblemTypes, type ProblemTypeRule } from '../problem-types.js';
import { declareEventTypes, type EventTypeRule } from '../outbox/event-types.js';
import { createEntries, deleteEntries, writeEntries } from './batches/actions.js';
import { batchOperation, type BatchSpec } from './batches/batch.js';
import {
  createOperation,
  deleteOperation,
  listOperation,
  readOperation,
  writeOperation,
  presented,
  type Collection,
  type CreateSpec,
  type DeleteSpec,
  type ListSpec,
  type ReadSpec,
  type View,
  type Write,
  type WriteSpec,
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
export type App = Parameters<FastifyPluginAsyncTypebox>[0];

/** The operations of a resource, in the order they are added, and so stand in the OpenAPI document. */
type Step = 'list' | 'create' | 'read' | 'replace' | 'change' | 'remove' | 'batch';

interface Versioned {
  id: number;
  version: number;
}

/**
 * The operations of a collection of versioned records, declared once (docs/architecture.md "Adding a
 * resource"): the collection, and for each operation it has the service function that does the work
 * (handed the request's context where it needs the access) and only what its documentation or route
 * says beyond the engine's usual (engine/collection.ts): an operationId such as placeOrder, a
 * summary, a description, problems, a rate-limit budget. Replace and the batch are for the
 * resources that have them; the batch runs each entry through the very service function of the
 * single request it stands for, and spends from the budget the single create declares.
 */
export interface OperationsDeclaration<
  Record extends TSchema,
  Stored extends Versioned,
  Create extends TSchema,
  Replace extends TObject = TObject,
  Patch extends TObject = TObject,
> {
  collection: Collection<Record, Stored>;
  list: ListSpec<Record>;
  create: CreateSpec<Stored, Create>;
  read: ReadSpec<Record, Stored>;
  replace?: WriteSpec<Replace> & { replace: Write<Replace, Stored> };
  change: WriteSpec<Patch> & { change: Write<Patch, Stored> };
  remove: DeleteSpec;
  batch?: {
    /** What the batch's description says beyond the usual (what a create does besides, the keys two entries may not share). */
    description: string;
    /** The natural key an entry names (`email:…`): two entries may not share one, nor an id. */
    keys?: (entry: object) => string[];
  };
  /**
   * Operations of the resource's own, each added right after the operation it is keyed by, where
   * it stands in the document (a user's /me after create, before /v1/users/{id}; an order's
   * /cancel after PATCH).
   */
  after?: { [step in Step]?: (app: App) => void };
}

/** Adds the declared operations to `app`, in the order of `Step`. */
export function addOperations<
  Record extends TSchema,
  Stored extends Versioned,
  Create extends TSchema,
  Replace extends TObject,
  Patch extends TObject,
>(app: App, declaration: OperationsDeclaration<Record, Stored, Create, Replace, Patch>): void {
  const { collection, replace, change, remove, batch, after } = declaration;
  const steps: [Step, (() => void) | undefined][] = [
    ['list', () => listOperation(app, collection, declaration.list)],
    ['create', () => createOperation(app, collection, declaration.create)],
    ['read', () => readOperation(app, collection, declaration.read)],
    ['replace', replace && (() => writeOperation(app, collection, 'replace', replace, replace.replace))],
    ['change', () => writeOperation(app, collection, 'change', change, change.change)],
    ['remove', () => deleteOperation(app, collection, remove)],
    ['batch', batch && (() => batchOperation(app, batchOf(declaration, batch)))],
  ];
  for (const [step, add] of steps) {
    add?.();
    after?.[step]?.(app);
  }
}

/** The batch of a declared resource: create, replace (where it has one), change and delete, each entry run by the single operation's service function. */
function batchOf<
  Record extends TSchema,
  Stored extends Versioned,
  Create extends TSchema,
  Replace extends TObject,
  Patch extends TObject,
>(
  { collection, create, replace, change, remove }: OperationsDeclaration<Record, Stored, Create, Replace, Patch>,
  batch: NonNullable<OperationsDeclaration<Record, Stored, Create, Replace, Patch>['batch']>,
): BatchSpec {
  const { keys } = batch;
  const named = (entry: { id: number }) => [`id:${entry.id}`, ...(keys?.(entry) ?? [])];
  // A batch's creates spend from the budget the single create spends from (orders-create), one unit each.
  const budget = create.config?.rateLimitBudget;
  return {
    path: collection.path,
    resource: collection.name,
    singular: collection.singular,
    record: collection.record,
    permission: `${collection.name}:update`,
    description: batch.description,
    ...(budget === undefined ? {} : { rateLimitBudget: budget }),
    actions: [
      createEntries(collection, create.body, create.create, keys),
      ...(replace ? [writeEntries(collection, 'replace', replace.body, replace.replace, named)] : []),
      writeEntries(collection, 'change', change.body, change.change, named),
      deleteEntries(collection, remove.remove),
    ],
  };
}

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

/** The Fastify plugin that adds the declared resource's operations, each from its record service. */
export function resourceRoutes<
  Record extends TSchema,
  Stored extends StoredRecord,
  Create extends TObject,
  Replace extends TObject,
  Patch extends TObject,
>(declaration: ResourceDeclaration<Record, Stored, Create, Replace, Patch>): FastifyPluginAsyncTypebox {
  const operations = recordOperations(declaration);
  return async (app) => addOperations(app, operations);
}

/** A record service's resource as the operations it has: every one, each the service's function. */
function recordOperations<
  Record extends TSchema,
  Stored extends StoredRecord,
  Create extends TObject,
  Replace extends TObject,
  Patch extends TObject,
>({
  collection,
  service,
  ...declaration
}: ResourceDeclaration<Record, Stored, Create, Replace, Patch>): OperationsDeclaration<
  Record,
  Stored,
  Create,
  Replace,
  Patch
> {
  type Body = Static<Create>;
  const { routes } = declaration;
  const unique = service.rules.unique;
  return {
    collection,
    list: {
      list: async (db, query, sight) => {
        const page = await service.list(db, query, sight);
        if (!collection.present) return page as Page<View<Record>>;
        return { ...page, rows: page.rows.map((stored) => presented(collection, stored)) };
      },
    },
    create: {
      ...declaration.create,
      create: (trx, body, context) => service.create(trx, body as Body, creatorOf(context.access, collection.name)),
    },
    read: { read: service.get },
    replace: {
      body: declaration.replace,
      replace: (trx, id, body, condition, sight) => service.replace(trx, id, body as Body, condition, sight),
    },
    change: {
      body: declaration.patch,
      change: (trx, id, body, condition, sight) => service.patch(trx, id, body as Partial<Body>, condition, sight),
    },
    remove: { summary: declaration.remove.summary, remove: service.remove },
    batch: {
      description: declaration.batch.description,
      // Two entries of a batch may not name one record by its natural key either.
      keys: (entry) => {
        if (unique === undefined) return [];
        const value = (entry as { [field: string]: unknown })[unique.field];
        return value === undefined ? [] : [`${unique.field}:${unique.key ? unique.key(String(value)) : String(value)}`];
      },
    },
    ...(routes ? { after: { create: (app: App) => routes(app, service) } } : {}),
  };
}
