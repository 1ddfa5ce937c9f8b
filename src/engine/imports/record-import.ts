import { setImmediate as turn } from 'node:timers/promises';
import type { TSchema } from 'typebox';
import type { Scope } from '../../auth/policy.js';
import { creatorOf, sightOnCollection } from '../../auth/visibility.js';
import type { Executor, Trx } from '../../db/database.js';
import type { Sight } from '../../db/visibility.js';
import { recordEvents, type EventDraft } from '../../outbox/outbox.js';
import type { Fields, RecordService, StoredRecord } from '../records.js';
import { findByKeys, insertMany } from '../records.repository.js';
import {
  inSlices,
  type ChunkOutcome,
  type ImportContext,
  type ImportTarget,
  type RowError,
  type RowWritten,
} from './target.js';

/**
 * The statements a resource may bring for its import's chunks, where it writes them faster than the
 * engine's own (compiled multi-row statements): reading the stored records of many keys, inserting
 * many (a key taken meanwhile left out) and updating many, each at the version read.
 */
export interface BulkStatements<Stored, Body> {
  findByKeys(db: Executor, keys: string[], sight: Sight): Promise<(Stored & { visible: boolean })[]>;
  insert(db: Executor, rows: (Fields<Stored, Body> & { created_by: number | null })[], now: string): Promise<Stored[]>;
  updateAtVersions(
    db: Executor,
    changes: (Fields<Stored, Body> & { id: number; version: number })[],
    now: string,
  ): Promise<Stored[]>;
}

/** What a resource's import declares beyond its service: the columns of its files and an example row. */
export interface RecordImport<Stored extends StoredRecord, Body extends object> {
  scopes: readonly Scope[];
  columns: readonly string[];
  required: readonly string[];
  example: Record<string, unknown>;
  /** One row as JSON; the service's create body by default. */
  schema: TSchema;
  /** A CSV row's text cells as the JSON the schema checks; the cells as they are by default. */
  fromCsv?: (cells: Record<string, string>) => Record<string, unknown>;
  bulk?: BulkStatements<Stored, Body>;
}

interface Row<Body> {
  row: number;
  value: Body;
}

/**
 * The import of a declared resource (docs/bulk.md "Imports"): a row is its create body; with a
 * natural key, a key not stored creates the record and one stored follows on_conflict (update: the
 * writable fields as the row says; a row that changes nothing is skipped), a record the importer
 * cannot see is one whose key is taken, as the single POST answers; without one, every row creates a
 * record. A chunk is a few statements whatever its size: a read of its keys, an insert of the new
 * records and an update of the changed ones, a slice at a time, and their events.
 */
export function recordImport<Stored extends StoredRecord, Body extends object>(
  service: RecordService<Stored, Body>,
  spec: RecordImport<Stored, Body>,
): ImportTarget {
  const { rules } = service;
  // A resource imported is one whose writes tell events.
  const recorded = rules.events!;
  const unique = rules.unique;
  const keyOfValue = (value: unknown) => (unique?.key ? unique.key(String(value)) : String(value));
  const { fieldsOf, columnsOf, pathOf } = service;
  // Bulk statements may read more than the record's columns (a user's email key): an event tells the record.
  const shown = (stored: Stored) =>
    service.shown(Object.fromEntries(rules.columns.map((column) => [column, stored[column]])) as unknown as Stored);
  const bulk: BulkStatements<Stored, Body> = spec.bulk ?? {
    findByKeys: (db, keys, sight) =>
      findByKeys<Stored>(
        db,
        { table: rules.table, columns: rules.columns },
        unique!.column ?? unique!.field,
        keys,
        rules.resource,
        sight,
      ),
    insert: (db, rows, now) =>
      insertMany<Stored>(
        db,
        { table: rules.table, columns: rules.columns },
        rows.map((row) => ({ ...columnsOf(row), created_by: row.created_by })),
        now,
        unique?.column ?? unique?.field,
      ),
    updateAtVersions: async (db, changes, now) => {
      const updated: Stored[] = [];
      for (const { id, version, ...fields } of changes) {
        const stored = await service.queries.updateAtVersion(
          db,
          id,
          version,
          columnsOf(fields as unknown as Fields<Stored, Body>),
          now,
        );
        if (stored !== undefined) updated.push(stored);
      }
      return updated;
    },
  };
  const taken = (row: number, value: unknown): RowError => ({
    row,
    field: unique!.field,
    problem: unique!.problem,
    detail: lowerFirst(unique!.detail(String(value)).replace(/\.$/, '')),
  });

  async function write(trx: Trx, rows: readonly Row<Body>[], context: ImportContext): Promise<ChunkOutcome> {
    const sight = sightOnCollection(context.access, rules.resource);
    const creator = creatorOf(context.access, rules.resource);
    const written: RowWritten[] = [];
    const errors: RowError[] = [];
    const events: EventDraft[] = [];
    const fresh: Row<Body>[] = [];
    const changed: (Row<Body> & { fields: Fields<Stored, Body>; stored: Stored })[] = [];
    const stored = new Map(
      unique === undefined
        ? []
        : (
            await bulk.findByKeys(
              trx,
              rows.map((row) => keyOfValue(row.value[unique.field])),
              sight,
            )
          ).map((record) => [keyOfValue(record[unique.field]), record]),
    );
    for (const row of rows) {
      const record = unique === undefined ? undefined : stored.get(keyOfValue(row.value[unique.field]));
      if (record === undefined) fresh.push(row);
      // A record the importer cannot see is one it would create, whose key is taken: as the single POST answers.
      else if (!record.visible) errors.push(taken(row.row, row.value[unique!.field]));
      else if (context.onConflict === 'skip') written.push({ row: row.row, outcome: 'skipped' });
      else if (context.onConflict === 'error') errors.push(taken(row.row, row.value[unique!.field]));
      else {
        const fields = fieldsOf(row.value);
        if (!service.changes(record, fields)) written.push({ row: row.row, outcome: 'skipped', id: record.id });
        else changed.push({ ...row, fields, stored: record });
      }
    }
    // One UPDATE a slice for the records to change, each at the version read.
    const updated = new Map(
      (
        await inSlices(trx, context, changed, (slice) =>
          bulk.updateAtVersions(
            trx,
            slice.map(({ fields, stored }) => ({ ...fields, id: stored.id, version: stored.version })),
            context.now,
          ),
        )
      ).map((record) => [record.id, record]),
    );
    for (const { row, stored } of changed) {
      const record = updated.get(stored.id);
      if (record === undefined) {
        errors.push({
          row,
          field: unique!.field,
          problem: 'precondition-failed',
          detail: `${rules.noun.toLowerCase()} ${stored.id} changed while the import ran; retry`,
        });
        continue;
      }
      events.push({ type: recorded.updated, path: pathOf(record.id), data: shown(record) });
      written.push({ row, outcome: 'updated', id: record.id });
    }
    if (fresh.length > 0) {
      // A slice at a time, the event loop given a turn between: requests are read and answered meanwhile.
      const inserted = await inSlices(trx, context, fresh, (slice) =>
        bulk.insert(
          trx,
          slice.map(({ value }) => ({ ...fieldsOf(value), created_by: creator })),
          context.now,
        ),
      );
      await turn();
      const byKey =
        unique === undefined
          ? undefined
          : new Map(inserted.map((record) => [keyOfValue(record[unique.field]), record]));
      fresh.forEach((row, index) => {
        const record = byKey === undefined ? inserted[index] : byKey.get(keyOfValue(row.value[unique!.field]));
        // Not inserted: a concurrent request took the key after the read (PostgreSQL).
        if (record === undefined) {
          errors.push(taken(row.row, row.value[unique!.field]));
          return;
        }
        events.push({ type: recorded.created, path: pathOf(record.id), data: shown(record) });
        written.push({ row: row.row, outcome: 'created', id: record.id });
      });
    }
    await inSlices(trx, context, events, (slice) => recordEvents(trx, slice));
    return { written, errors };
  }

  return {
    name: rules.resource as ImportTarget['name'],
    path: rules.path,
    resource: rules.resource,
    scopes: spec.scopes,
    example: spec.example,
    columns: spec.columns,
    required: spec.required,
    schema: spec.schema,
    fromCsv: spec.fromCsv ?? ((cells) => ({ ...cells })),
    ...(unique === undefined ? {} : { keyOf: (row: Body) => keyOfValue(row[unique.field]), keyField: unique.field }),
    recordPath: (id) => `${rules.path}/${id}`,
    write: (trx, rows, context) => write(trx, rows as unknown as Row<Body>[], context),
  };
}

const lowerFirst = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);
