import { setImmediate as turn } from 'node:timers/promises';
import type { TSchema } from 'typebox';
import type { Scope } from '../../auth/policy.js';
import { creatorOf, sightOnCollection } from '../../auth/visibility.js';
import type { Executor, Trx } from '../../db/database.js';
import type { Sight } from '../../db/visibility.js';
import { recordEvents, type EventDraft } from '../../outbox/outbox.js';
import type { Fields, RecordService, StoredRecord } from '../records.js';
import { findByKeys, insertMany } from '../records.repository.js';
import { ChunkReport, inSlices, type ImportContext, type ImportTarget, type ImportRow } from './target.js';

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
export interface RecordImport<Stored extends StoredRecord, Body extends object, Value extends Body = Body> {
  scopes: readonly Scope[];
  columns: readonly string[];
  required: readonly string[];
  example: Record<string, unknown>;
  /** One row as JSON; the service's create body by default. */
  schema: TSchema;
  /** A CSV row's text cells as the JSON the schema checks; the cells as they are by default. */
  fromCsv?: (cells: Record<string, string>) => Record<string, unknown>;
  bulk?: BulkStatements<Stored, Body>;
  /**
   * What a row writes besides its record (an item's stock), in the chunk's transaction once its
   * records are written: given every row whose record was created, updated or found unchanged
   * (on_conflict=update), set-based, as a few statements for the whole chunk. It answers the
   * events of what it wrote, recorded after the records' own, and the rows it changed: a row whose
   * record was unchanged but which changed something here counts as updated.
   */
  alsoWrites?: (
    trx: Trx,
    rows: readonly RecordWritten<Stored, Value>[],
    context: ImportContext,
  ) => Promise<AlsoWritten>;
}

/** A row whose record an import created, updated or left as it was. */
export interface RecordWritten<Stored, Value> {
  row: number;
  value: Value;
  record: Stored;
  outcome: 'created' | 'updated' | 'unchanged';
}

export interface AlsoWritten {
  events: EventDraft[];
  /** The rows (their numbers) whose other writes changed something. */
  changed: ReadonlySet<number>;
}

/**
 * The import of a declared resource (docs/bulk.md "Imports"): a row is its create body; with a
 * natural key, a key not stored creates the record and one stored follows on_conflict (update: the
 * writable fields as the row says; a row that changes nothing is skipped), a record the importer
 * cannot see is one whose key is taken, as the single POST answers; without one, every row creates a
 * record. A chunk is a few statements whatever its size: a read of its keys, an insert of the new
 * records and an update of the changed ones, a slice at a time, what the rows also write
 * (alsoWrites), and the events: the created records', the updated ones', then the other writes'.
 */
export function recordImport<Stored extends StoredRecord, Body extends object, Value extends Body = Body>(
  service: RecordService<Stored, Body>,
  spec: RecordImport<Stored, Body, Value>,
): ImportTarget<Value> {
  const { rules } = service;
  // A resource imported is one whose writes tell events: refused when it is declared, not mid-import.
  const recorded =
    rules.events ??
    (() => {
      throw new Error(`${rules.resource} records no events, so it cannot be imported`);
    })();
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
  async function write(trx: Trx, rows: readonly ImportRow<Value>[], context: ImportContext): Promise<ChunkReport> {
    const sight = sightOnCollection(context.access, rules.resource);
    const creator = creatorOf(context.access, rules.resource);
    const report = new ChunkReport();
    const taken = (row: number, value: unknown) =>
      report.refused(row, unique!.field, unique!.problem, lowerFirst(unique!.detail(String(value)).replace(/\.$/, '')));
    const fresh: ImportRow<Value>[] = [];
    // The stored records the rows name (on_conflict=update), in the rows' order: changed or not.
    const existing: (ImportRow<Value> & { fields: Fields<Stored, Body>; stored: Stored; changes: boolean })[] = [];
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
      else if (!record.visible) taken(row.row, row.value[unique!.field]);
      else if (context.onConflict === 'skip') report.wrote(row.row, 'skipped');
      else if (context.onConflict === 'error') taken(row.row, row.value[unique!.field]);
      else {
        const fields = fieldsOf(row.value);
        existing.push({ ...row, fields, stored: record, changes: service.changes(record, fields) });
      }
    }
    const results: RecordWritten<Stored, Value>[] = [];
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
        if (record === undefined) taken(row.row, row.value[unique!.field]);
        else results.push({ row: row.row, value: row.value, record, outcome: 'created' });
      });
    }
    // One UPDATE a slice for the records to change, each at the version read.
    const changed = existing.filter((row) => row.changes);
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
    for (const { row, value, stored, changes } of existing) {
      const record = changes ? updated.get(stored.id) : stored;
      if (record === undefined) {
        report.refused(
          row,
          unique!.field,
          'precondition-failed',
          `${rules.noun.toLowerCase()} ${stored.id} changed while the import ran; retry`,
        );
        continue;
      }
      results.push({ row, value, record, outcome: changes ? 'updated' : 'unchanged' });
    }
    const also = spec.alsoWrites === undefined ? undefined : await spec.alsoWrites(trx, results, context);
    const events: EventDraft[] = [];
    for (const { row, record, outcome } of results) {
      if (outcome !== 'unchanged')
        events.push({ type: recorded[outcome], path: pathOf(record.id), data: shown(record) });
      const touched = outcome !== 'unchanged' || also?.changed.has(row) === true;
      report.wrote(row, outcome === 'created' ? 'created' : touched ? 'updated' : 'skipped', record.id);
    }
    if (also !== undefined) events.push(...also.events);
    await inSlices(trx, context, events, (slice) => recordEvents(trx, slice));
    return report;
  }

  return {
    name: rules.resource,
    path: rules.path,
    resource: rules.resource,
    scopes: spec.scopes,
    example: spec.example,
    columns: spec.columns,
    required: spec.required,
    schema: spec.schema,
    fromCsv: spec.fromCsv ?? ((cells) => ({ ...cells })),
    ...(unique === undefined ? {} : { keyOf: (row: Value) => keyOfValue(row[unique.field]), keyField: unique.field }),
    recordPath: (id) => `${rules.path}/${id}`,
    write,
  };
}

const lowerFirst = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);
