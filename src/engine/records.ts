import { nowTimestamp } from '../db/clock.js';
import type { Executor, Trx } from '../db/database.js';
import { isUniqueViolation } from '../db/driver-errors.js';
import type { ListQuery } from '../db/keyset.js';
import { deleteAtVersion, type VersionedTable } from '../db/versioned.js';
import type { Sight } from '../db/visibility.js';
import { ConflictError, NotFoundError } from '../errors.js';
import type { ProblemType } from '../problem-types.js';
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
  type LockedWrite,
} from './preconditions.js';
import { recordQueries, type RecordQueries } from './records.repository.js';

/**
 * What every stored record of a declared resource has: its id, timestamps and version, and its owner
 * unless its resource has none.
 */
export interface StoredRecord {
  id: number;
  created_by?: number | null;
  created_at: string;
  updated_at: string;
  version: number;
}

/**
 * What a resource of versioned records declares about them (docs/architecture.md "Adding a
 * resource"): its table and columns, the fields a body writes and how each is stored, the natural key
 * that is unique among them, its events, and what it checks or adds around a write of its own.
 * Everything else a write does is the same for every such resource and done here: the lock, the
 * If-Match check, read-only echoes, a write that changes nothing keeping the version, the conditional
 * write, the unique key's 409, the event in the write's transaction, and 404 for a record the sight
 * does not show. `Asker` is what a resource's own checks need to know of who writes (an endpoint's
 * access); `Read` the record as a write reads it, when more than its own columns (an endpoint with its
 * owner's grants).
 */
export interface RecordRules<Stored extends StoredRecord, Body, Asker = unknown, Read extends Stored = Stored> {
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
   * Its records have no owner (no created_by): the scope alone decides who sees them (callers,
   * webhook endpoints), so no sight narrows a read and a create stores no creator.
   */
  ownerless?: true;
  /** How one record is read, when not from its own columns alone (an endpoint with its owner's grants). */
  read?: (db: Executor, id: number) => Promise<Read | undefined>;
  /**
   * The fields a POST or PUT body writes, each with how its value is stored (an item's decimal
   * price as minor units); a PATCH writes the members it has and keeps the others. A resource whose
   * columns are made from the whole body declares `stores` and `patches` instead.
   */
  writable?: { [Field in keyof Body & keyof Stored]-?: (value: NonNullable<Body[Field]>) => Stored[Field] };
  /**
   * The columns a POST or PUT stores, made from the whole body rather than field by field (a
   * caller's grants and record access, an endpoint's owner and secret); it may refuse the body.
   */
  stores?: (body: Body, asker: Asker) => Partial<Stored>;
  /** The columns a PATCH stores over the stored record, when `stores` makes them (only those it changes, or all). */
  patches?: (stored: Read, patch: Partial<Body>, asker: Asker) => Partial<Stored>;
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
  /** The events its writes record; none for a resource whose changes tell no event (webhook endpoints). */
  events?: { created: EventType; updated: EventType; deleted: EventType };
  /** The record as answered and as its events tell it, when the stored one differs (an item's price). */
  present?: (stored: Stored) => unknown;
  /**
   * A lock a change or delete takes before its row's, for writes that must take turns across records
   * (whether any caller can still manage callers decides from every admin).
   */
  takeTurns?: (trx: Trx) => Promise<void>;
  /**
   * Refuses the asker a change or delete of the record (a problem), before the If-Match check, as a
   * permission comes before preconditions; given the patch of a change, to judge the record as it
   * would be after (an endpoint's access).
   */
  mayChange?: (stored: Read, asker: Asker, patch?: Partial<Body>) => void;
  /** Read-only fields of its own that a PUT or PATCH body echoes with another value than stored (a caller's scopes). */
  echoesDiffering?: (stored: Read, body: object) => string[];
  /** Refuses (a problem) a change of the stored record to these columns, once they are made (the last admin). */
  assertChange?: (trx: Trx, stored: Read, columns: Partial<Stored>) => Promise<void>;
  /** Runs in the create's transaction after the insert (an item's stock at 0). */
  afterCreate?: (trx: Trx, stored: Stored, now: string) => Promise<void>;
  /** Refuses a delete (409) while something refers to the record (a user's placed orders, the last admin). */
  beforeDelete?: (trx: Trx, stored: Read) => Promise<void>;
}

/** The service functions of a declared resource, as its routes, batches and other resources call them. */
export interface RecordService<Stored extends StoredRecord, Body, Asker = unknown, Read extends Stored = Stored> {
  rules: RecordRules<Stored, Body, Asker, Read>;
  queries: RecordQueries<Stored>;
  /** A body's writable fields as stored (an item's price in minor units), field by field. */
  fieldsOf(body: Body): Fields<Stored, Body>;
  /** What a write stores: the writable fields and the columns derived from them. */
  columnsOf(fields: Fields<Stored, Body>): Record<string, unknown>;
  /** Whether writing `fields` would change the stored record (one that would not keeps its version). */
  changes(stored: Stored, fields: Fields<Stored, Body> | Partial<Stored>): boolean;
  /** The record as answered and as its events tell it. */
  shown(stored: Stored): unknown;
  pathOf(id: number): string;
  get(db: Executor, id: number, sight: Sight): Promise<Read>;
  list(
    db: Executor,
    query: ListQuery,
    sight: Sight,
  ): Promise<{ rows: Stored[]; nextAfter: (string | number)[] | undefined }>;
  create(trx: Trx, body: Body, creator: number | null, asker?: Asker): Promise<Stored>;
  replace(trx: Trx, id: number, body: Body, condition: VersionCondition, sight: Sight, asker?: Asker): Promise<Stored>;
  /** JSON Merge Patch: members present replace stored values; absent members stay. */
  patch(
    trx: Trx,
    id: number,
    patch: Partial<Body>,
    condition: VersionCondition,
    sight: Sight,
    asker?: Asker,
  ): Promise<Stored>;
  /**
   * A change of the resource's own, with no body (an endpoint's new secret): `next` makes the columns
   * from the stored record, between the checks every change makes and the write.
   */
  update(
    trx: Trx,
    id: number,
    condition: VersionCondition,
    next: (stored: Read) => Partial<Stored>,
    sight: Sight,
    asker?: Asker,
  ): Promise<Stored>;
  remove(trx: Trx, id: number, condition: VersionCondition, sight: Sight, asker?: Asker): Promise<void>;
  notFound(id: number): NotFoundError;
}

/** The writable fields of a record, as stored. */
export type Fields<Stored, Body> = Pick<Stored, keyof Body & keyof Stored>;

export function recordService<
  Stored extends StoredRecord,
  Body extends object,
  Asker = unknown,
  Read extends Stored = Stored,
>(rules: RecordRules<Stored, Body, Asker, Read>): RecordService<Stored, Body, Asker, Read> {
  const queries = recordQueries<Stored>({ table: rules.table, columns: rules.columns, ownerless: rules.ownerless });
  const names = Object.keys(rules.writable ?? {}) as (keyof Body & keyof Stored & string)[];
  const table = rules.table as VersionedTable;
  const what = (id: number) => `${rules.noun} ${id}`;
  const pathOf = (id: number) => `${rules.path}/${id}`;
  const shown = (stored: Stored) => (rules.present ? rules.present(stored) : stored);
  const notFound = (id: number) => new NotFoundError(`There is no ${rules.noun.toLowerCase()} ${id}.`);
  const convert = (field: keyof Body & keyof Stored, value: unknown) =>
    (rules.writable![field] as (value: unknown) => unknown)(value);
  const columnsOf = (fields: Fields<Stored, Body> | Partial<Stored>): Record<string, unknown> => ({
    ...fields,
    ...rules.derived?.(fields as Fields<Stored, Body>),
  });
  const changes = (stored: Stored, fields: Fields<Stored, Body> | Partial<Stored>) =>
    Object.entries(fields).some(([name, value]) => value !== stored[name as keyof Stored]);
  const fieldsOf = (body: Body) =>
    Object.fromEntries(names.map((name) => [name, convert(name, body[name])])) as Fields<Stored, Body>;
  const bodyColumns = (body: Body, asker: Asker): Partial<Stored> =>
    rules.stores ? rules.stores(body, asker) : (fieldsOf(body) as unknown as Partial<Stored>);
  const patchColumns = (record: Read, patch: Partial<Body>, asker: Asker): Partial<Stored> =>
    rules.patches
      ? rules.patches(record, patch, asker)
      : (Object.fromEntries(
          names.map((name) => [name, patch[name] === undefined ? record[name] : convert(name, patch[name])]),
        ) as Partial<Stored>);

  async function withUniqueness<T>(fields: Partial<Stored>, write: () => Promise<T>): Promise<T> {
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

  async function get(db: Executor, id: number, sight: Sight): Promise<Read> {
    const record = rules.read
      ? await rules.read(db, id)
      : ((await queries.findById(db, id, sight)) as Read | undefined);
    if (!record) throw notFound(id);
    return record;
  }

  /** The row locked (after the resource's own turn), read, and the asker let change it; then `write`. */
  async function locked<T>(
    trx: Trx,
    id: number,
    sight: Sight,
    asker: Asker,
    patch: Partial<Body> | undefined,
    write: (stored: Read) => Promise<LockedWrite<T>>,
  ): Promise<T> {
    await rules.takeTurns?.(trx);
    return withRowLocked(
      trx,
      { table, id },
      async () => {
        const stored = await get(trx, id, sight);
        rules.mayChange?.(stored, asker, patch);
        return write(stored);
      },
      what(id),
    );
  }

  function change(
    trx: Trx,
    id: number,
    condition: VersionCondition,
    sight: Sight,
    asker: Asker,
    body: Partial<Body> | undefined,
    next: (stored: Read) => Partial<Stored>,
  ): Promise<Stored> {
    return locked(trx, id, sight, asker, body, async (stored) => {
      assertCondition(condition, stored.version, what(id));
      if (body !== undefined)
        assertReadOnlyEchoes(stored, body, [
          ...createdByDiffers({ created_by: stored.created_by ?? null }, body),
          ...(rules.echoesDiffering?.(stored, body) ?? []),
        ]);
      const wanted = next(stored);
      await rules.assertChange?.(trx, stored, wanted);
      // A write that changes nothing keeps the version, so ETags held by clients stay valid.
      if (!changes(stored, wanted)) return written<Stored>(stored);
      const updated = await withUniqueness(wanted, () =>
        queries.updateAtVersion(trx, id, stored.version, columnsOf(wanted), nowTimestamp()),
      );
      if (!updated) return VERSION_MOVED;
      if (rules.events) await recordEvent(trx, rules.events.updated, pathOf(id), shown(updated));
      return written(updated);
    });
  }

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
    async create(trx, body, creator, asker) {
      const now = nowTimestamp();
      const fields = bodyColumns(body, asker as Asker);
      const owner = rules.ownerless ? {} : { created_by: creator };
      const record = await withUniqueness(fields, () => queries.insert(trx, { ...columnsOf(fields), ...owner }, now));
      await rules.afterCreate?.(trx, record, now);
      if (rules.events) await recordEvent(trx, rules.events.created, pathOf(record.id), shown(record));
      return record;
    },
    replace: (trx, id, body, condition, sight, asker) =>
      change(trx, id, condition, sight, asker as Asker, body, () => bodyColumns(body, asker as Asker)),
    patch: (trx, id, patch, condition, sight, asker) =>
      change(trx, id, condition, sight, asker as Asker, patch, (record) => patchColumns(record, patch, asker as Asker)),
    update: (trx, id, condition, next, sight, asker) =>
      change(trx, id, condition, sight, asker as Asker, undefined, next),
    async remove(trx, id, condition, sight, asker) {
      await locked(trx, id, sight, asker as Asker, undefined, async (stored) => {
        assertCondition(condition, stored.version, what(id));
        await rules.beforeDelete?.(trx, stored);
        if (!(await deleteAtVersion(trx, table, id, stored.version))) return VERSION_MOVED;
        if (rules.events)
          await recordEvents(trx, [
            { type: rules.events.deleted, path: pathOf(id), data: { id }, owner: ownerOf(rules.resource, stored) },
          ]);
        return DELETED;
      });
    },
  };
}
