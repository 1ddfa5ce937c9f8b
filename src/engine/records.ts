import { nowTimestamp } from '../db/clock.js';
import type { Executor, Trx } from '../db/database.js';
import { isUniqueViolation } from '../db/driver-errors.js';
import type { ListQuery } from '../db/keyset.js';
import { deleteAtVersion, type VersionedTable } from '../db/versioned.js';
import type { Sight } from '../db/visibility.js';
import { ConflictError, NotFoundError, type ProblemType } from '../errors.js';
import type { VersionCondition } from '../http/records.js';
import { ownerOf, recordEvent, recordEvents } from '../outbox/outbox.js';
import type { EventType } from '../outbox/event-types.js';
import { createdByDiffers } from './ownership.js';
import {
  assertCondition,
  assertReadOnlyEchoes,
  DELETED,
  VERSION_MOVED,
  withRowLocked,
  written,
} from './preconditions.js';
import { recordQueries, type RecordQueries } from './records.repository.js';

/** What every stored record of a declared resource has: its id, owner, timestamps and version. */
export interface StoredRecord {
  id: number;
  created_by: number | null;
  created_at: string;
  updated_at: string;
  version: number;
}

/**
 * What a resource of versioned records with an owner declares about them (docs/architecture.md
 * "Adding a resource"): its table and columns, the fields a body writes and how each is stored, the
 * natural key that is unique among them, its events, and what it checks or adds around a write of
 * its own. Everything else a write does is the same for every such resource and done here: the
 * lock, the If-Match check, read-only echoes, a write that changes nothing keeping the version, the
 * conditional write, the unique key's 409, the event in the write's transaction, and 404 for a
 * record the sight does not show.
 */
export interface RecordRules<Stored extends StoredRecord, Body extends object> {
  /** The resource's name (`users`): its records' owner rule and its events' resource. */
  resource: string;
  /** Where its records live: `${path}/${id}`. */
  path: string;
  /** A record's name in messages (`User 3`, `There is no user 3.`). */
  noun: string;
  table: string;
  /** The columns a record is read with: the API fields and the version its ETag comes from. */
  columns: readonly (keyof Stored & string)[];
  /**
   * The fields a POST or PUT body writes, each with how its value is stored (an item's decimal
   * price as minor units); a PATCH writes the members it has and keeps the others.
   */
  writable: { [Field in keyof Body & keyof Stored]-?: (value: NonNullable<Body[Field]>) => Stored[Field] };
  /** Columns the engine stores beside the writable fields, made from them (a user's email key). */
  derived?: (fields: Pick<Stored, keyof Body & keyof Stored>) => Record<string, unknown>;
  /** The natural key no two records share: the unique constraint, the field, and the 409 it answers. */
  unique?: {
    constraint: string;
    field: keyof Body & keyof Stored & string;
    /** The key compared, when not the value as written (an email without regard to case). */
    key?: (value: string) => string;
    /** The column the key is stored in, when not the field's own (a user's email_key). */
    column?: string;
    problem: ProblemType;
    detail: (value: string) => string;
  };
  events: { created: EventType; updated: EventType; deleted: EventType };
  /** The record as answered and as its events tell it, when the stored one differs (an item's price). */
  present?: (stored: Stored) => unknown;
  /** Runs in the create's transaction after the insert (an item's stock at 0). */
  afterCreate?: (trx: Trx, stored: Stored, now: string) => Promise<void>;
  /** Refuses a delete (409) while something refers to the record (a user's placed orders). */
  beforeDelete?: (trx: Trx, stored: Stored) => Promise<void>;
}

/** The service functions of a declared resource, as its routes, batches and other resources call them. */
export interface RecordService<Stored extends StoredRecord, Body extends object> {
  rules: RecordRules<Stored, Body>;
  queries: RecordQueries<Stored>;
  /** A body's writable fields as stored (an item's price in minor units). */
  fieldsOf(body: Body): Fields<Stored, Body>;
  /** What a write stores: the writable fields and the columns derived from them. */
  columnsOf(fields: Fields<Stored, Body>): Record<string, unknown>;
  /** Whether writing `fields` would change the stored record (one that would not keeps its version). */
  changes(stored: Stored, fields: Fields<Stored, Body>): boolean;
  /** The record as answered and as its events tell it. */
  shown(stored: Stored): unknown;
  pathOf(id: number): string;
  get(db: Executor, id: number, sight: Sight): Promise<Stored>;
  list(
    db: Executor,
    query: ListQuery,
    sight: Sight,
  ): Promise<{ rows: Stored[]; nextAfter: (string | number)[] | undefined }>;
  create(trx: Trx, body: Body, creator: number | null): Promise<Stored>;
  replace(trx: Trx, id: number, body: Body, condition: VersionCondition, sight: Sight): Promise<Stored>;
  /** JSON Merge Patch: members present replace stored values; absent members stay. */
  patch(trx: Trx, id: number, patch: Partial<Body>, condition: VersionCondition, sight: Sight): Promise<Stored>;
  remove(trx: Trx, id: number, condition: VersionCondition, sight: Sight): Promise<void>;
  notFound(id: number): NotFoundError;
}

/** The writable fields of a record, as stored. */
export type Fields<Stored, Body> = Pick<Stored, keyof Body & keyof Stored>;

export function recordService<Stored extends StoredRecord, Body extends object>(
  rules: RecordRules<Stored, Body>,
): RecordService<Stored, Body> {
  const queries = recordQueries<Stored>({ table: rules.table, columns: rules.columns });
  const names = Object.keys(rules.writable) as (keyof Body & keyof Stored & string)[];
  const table = rules.table as VersionedTable;
  const what = (id: number) => `${rules.noun} ${id}`;
  const pathOf = (id: number) => `${rules.path}/${id}`;
  const shown = (stored: Stored) => (rules.present ? rules.present(stored) : stored);
  const notFound = (id: number) => new NotFoundError(`There is no ${rules.noun.toLowerCase()} ${id}.`);
  const convert = (field: keyof Body & keyof Stored, value: unknown) =>
    (rules.writable[field] as (value: unknown) => unknown)(value);
  const columnsOf = (fields: Fields<Stored, Body>): Record<string, unknown> => ({
    ...fields,
    ...rules.derived?.(fields),
  });
  const changes = (stored: Stored, fields: Fields<Stored, Body>) => names.some((name) => fields[name] !== stored[name]);

  async function withUniqueness<T>(fields: Fields<Stored, Body>, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      const unique = rules.unique;
      if (unique === undefined || !isUniqueViolation(error, unique.constraint)) throw error;
      throw new ConflictError(unique.problem, unique.detail(String(fields[unique.field])), {
        conflicting_field: unique.field,
      });
    }
  }

  async function get(db: Executor, id: number, sight: Sight): Promise<Stored> {
    const stored = await queries.findById(db, id, sight);
    if (!stored) throw notFound(id);
    return stored;
  }

  function change(
    trx: Trx,
    id: number,
    condition: VersionCondition,
    sight: Sight,
    body: object,
    next: (stored: Stored) => Fields<Stored, Body>,
  ): Promise<Stored> {
    return withRowLocked(
      trx,
      { table, id },
      async () => {
        const stored = await get(trx, id, sight);
        assertCondition(condition, stored.version, what(id));
        assertReadOnlyEchoes(stored, body, createdByDiffers(stored, body));
        const wanted = next(stored);
        // A write that changes nothing keeps the version, so ETags held by clients stay valid.
        if (!changes(stored, wanted)) return written(stored);
        const updated = await withUniqueness(wanted, () =>
          queries.updateAtVersion(trx, id, stored.version, columnsOf(wanted), nowTimestamp()),
        );
        if (!updated) return VERSION_MOVED;
        await recordEvent(trx, rules.events.updated, pathOf(id), shown(updated));
        return written(updated);
      },
      what(id),
    );
  }

  const fieldsOf = (body: Body) =>
    Object.fromEntries(names.map((name) => [name, convert(name, body[name])])) as Fields<Stored, Body>;

  return {
    rules,
    queries,
    fieldsOf,
    columnsOf,
    changes,
    shown,
    pathOf,
    get,
    notFound,
    list: (db, query, sight) => queries.findPage(db, query, sight),
    async create(trx, body, creator) {
      const now = nowTimestamp();
      const fields = fieldsOf(body);
      const stored = await withUniqueness(fields, () =>
        queries.insert(trx, { ...columnsOf(fields), created_by: creator }, now),
      );
      await rules.afterCreate?.(trx, stored, now);
      await recordEvent(trx, rules.events.created, pathOf(stored.id), shown(stored));
      return stored;
    },
    replace: (trx, id, body, condition, sight) => change(trx, id, condition, sight, body, () => fieldsOf(body)),
    patch: (trx, id, patch, condition, sight) =>
      change(
        trx,
        id,
        condition,
        sight,
        patch,
        (stored) =>
          Object.fromEntries(
            names.map((name) => [name, patch[name] === undefined ? stored[name] : convert(name, patch[name])]),
          ) as Fields<Stored, Body>,
      ),
    async remove(trx, id, condition, sight) {
      await withRowLocked(
        trx,
        { table, id },
        async () => {
          const stored = await get(trx, id, sight);
          assertCondition(condition, stored.version, what(id));
          await rules.beforeDelete?.(trx, stored);
          if (!(await deleteAtVersion(trx, table, id, stored.version))) return VERSION_MOVED;
          await recordEvents(trx, [
            { type: rules.events.deleted, path: pathOf(id), data: { id }, owner: ownerOf(rules.resource, stored) },
          ]);
          return DELETED;
        },
        what(id),
      );
    },
  };
}
