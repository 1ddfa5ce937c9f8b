import Type, { type Static, type TObject } from 'typebox';
import { CREATED_RANGE_FILTERS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import { Id, Nullable, RecordFields, Timestamp } from '../../http/schemas.js';
import { BackupOutcomeSchema } from './backups.schema.js';
import { CREATED_BY_FILTER, CreatedBy } from '../ownership.js';

const Count = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });

export const OPERATION_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
/** The name of a collection an import writes: one of the import targets the app registers (src/api/importers.ts). */
export type ImportTargetName = string;

export const RowErrorSchema = Type.Object(
  {
    row: Count('the row of the file: CSV counts the header as row 1, NDJSON counts lines from 1'),
    field: Nullable(
      Type.String({ maxLength: 200, description: 'the column or member concerned; null: the whole row' }),
    ),
    problem: Type.String({ maxLength: 64, description: 'the problem type, as in /problems/{type}' }),
    detail: Type.String({ maxLength: 2000, description: 'what is wrong with it' }),
  },
  { additionalProperties: false, title: 'OperationRowError', xml: { name: 'error' } },
);
export type RowError = Static<typeof RowErrorSchema>;

/** Every refused row of an operation, as JSON or XML (its NDJSON form is a row a line). */
export const RowErrorListSchema = Type.Object(
  { data: Type.Array(RowErrorSchema, { description: 'every refused row, in row order' }) },
  { additionalProperties: false, title: 'OperationRowErrors', xml: { name: 'errors' } },
);

export const ImportOptionsSchema = Type.Object(
  {
    mode: Type.Union([Type.Literal('atomic'), Type.Literal('partial')], {
      description: 'atomic: every row or none; partial: the good rows are committed, the bad ones reported',
    }),
    on_conflict: Type.Union([Type.Literal('error'), Type.Literal('skip'), Type.Literal('update')], {
      description: 'what a row whose natural key (item sku, user email) is taken does: fail, be skipped, or update',
    }),
    dry_run: Type.Boolean({ description: 'true: every row was checked, nothing was stored' }),
  },
  { additionalProperties: false },
);

/** Who started an operation, and when it was made and last changed: the same for every kind. */
const STARTED_BY = {
  created_by: CreatedBy,
  caller_name: Nullable(Type.String({ maxLength: 200, description: 'the name of the caller that started it' })),
  created_at: RecordFields.created_at,
  updated_at: RecordFields.updated_at,
};
const FinishedAt = Nullable(Type.String({ ...Timestamp, description: 'when it ended' }));

/**
 * An import's fields; its target is named by the targets the app registers (operationSchemas).
 * Built at load, as a spread of a shared schema (Timestamp) must be, before the engine adds its
 * bound to it when routes are registered (route-completion.ts bound).
 */
const IMPORT_FIELDS = {
  id: RecordFields.id,
  kind: Type.Literal('import', { description: 'what the operation does: an import of a file' }),
  target: Type.String({ description: 'the collection it writes' }),
  status: Type.Union(
    [
      Type.Literal('queued'),
      Type.Literal('running'),
      Type.Literal('succeeded'),
      Type.Literal('failed'),
      Type.Literal('cancelled'),
    ],
    { description: 'queued (waiting for a turn), running, or how it ended: succeeded, failed, cancelled' },
  ),
  media_type: Type.String({ maxLength: 100, description: 'the media type of the file' }),
  options: ImportOptionsSchema,
  progress: Type.Object(
    {
      bytes_read: Count('bytes of the file read'),
      bytes_total: Count("the file's size"),
      rows_read: Count('rows read (the header not counted)'),
      rows_succeeded: Count('rows stored (or, in a dry run, that would be)'),
      rows_skipped: Count('rows skipped: on_conflict=skip and the key was taken, or the row changed nothing'),
      rows_failed: Count('rows refused (listed in errors)'),
      committed_through: Count(
        'every row of the file up to this one is committed, except those failed; 0: none is committed',
      ),
    },
    { additionalProperties: false },
  ),
  ...STARTED_BY,
  started_at: Nullable(Type.String({ ...Timestamp, description: 'when it started running' })),
  finished_at: FinishedAt,
  summary: Type.Union([
    Type.Object(
      {
        detail: Type.String({ maxLength: 2000, description: 'how it ended, in words' }),
        rows_committed: Count('rows committed and kept'),
        committed: Type.String({
          maxLength: 2000,
          description: 'which rows were committed: a range of rows, less the failed ones',
        }),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ]),
  errors: Type.Array(RowErrorSchema, {
    maxItems: 20,
    description: 'the first errors of its rows (all of them at errors_url)',
  }),
  errors_url: Type.String({ maxLength: 100, description: 'every row error, as NDJSON' }),
};

const IMPORT_OPTIONS = { additionalProperties: false, title: 'ImportOperation', xml: { name: 'operation' } } as const;

const OperationStatus = Type.Union(
  [
    Type.Literal('queued'),
    Type.Literal('running'),
    Type.Literal('succeeded'),
    Type.Literal('failed'),
    Type.Literal('cancelled'),
  ],
  { description: 'queued (waiting for its turn), running, or how it ended: succeeded, failed, cancelled' },
);

/** A backup of the SQLite file into ROWI_BACKUP_DIR, started by POST /v1/backups (docs/backups.md). */
export const BackupOperationSchema = Type.Object(
  {
    id: RecordFields.id,
    kind: Type.Literal('backup', { description: 'what the operation does: a backup of the database' }),
    status: OperationStatus,
    ...STARTED_BY,
    started_at: Nullable(Type.String({ ...Timestamp, description: 'when it started copying' })),
    finished_at: FinishedAt,
    summary: Type.Union([BackupOutcomeSchema, Type.Null()], {
      description:
        'once ended: how, and on success the backup written (its file, size, SHA-256, schema version, row counts)',
    }),
  },
  { additionalProperties: false, title: 'BackupOperation', xml: { name: 'operation' } },
);
export type BackupOperation = Static<typeof BackupOperationSchema>;

/** An import, its target a string (operationSchemas names the targets there are). */
export type ImportOperation = Static<TObject<typeof IMPORT_FIELDS>>;
export type Operation = ImportOperation | BackupOperation;

export const OperationIdParams = Type.Object({ id: Id });

/** The filters of the operations' list that name no import target. */
const KIND_FILTER = {
  schema: Type.Union([Type.Literal('import'), Type.Literal('backup')], {
    description: 'only operations of this kind: imports or backups',
  }),
  column: 'kind',
  operator: '=',
} as const;
const STATUS_FILTER = {
  schema: Type.Union(
    OPERATION_STATUSES.map((status) => Type.Literal(status)),
    { description: 'only operations in this status' },
  ),
  column: 'status',
  operator: '=',
} as const;

/**
 * The schemas that name the import targets (an import's `target`, the list's filter), from the
 * targets the app registers: an operation names one of them, and a list asks for one of them.
 */
export const operationSchemas = (() => {
  const built = new Map<string, ReturnType<typeof buildOperationSchemas>>();
  return (targets: readonly ImportTargetName[]) => {
    const key = targets.join(' ');
    let schemas = built.get(key);
    if (schemas === undefined) built.set(key, (schemas = buildOperationSchemas(targets)));
    return schemas;
  };
})();

function buildOperationSchemas(targets: readonly ImportTargetName[]) {
  const ImportOperationSchema = Type.Object(
    {
      ...IMPORT_FIELDS,
      target: Type.Union(
        targets.map((target) => Type.Literal(target)),
        { description: 'the collection it writes' },
      ),
    },
    IMPORT_OPTIONS,
  );
  /** A long-running operation: an import of a file, or a backup; `kind` says which. */
  const OperationSchema = Type.Union([ImportOperationSchema, BackupOperationSchema], {
    title: 'Operation',
    xml: { name: 'operation' },
    description:
      'a long-running operation; `kind` says which: an import (ImportOperation) or a backup (BackupOperation)',
  });
  const OperationPageSchema = pageSchema(OperationSchema, 'operations');
  const OPERATION_COLLECTION: CollectionSpec = {
    sortable: { id: 'integer', created_at: 'string', status: 'string', target: 'string' },
    filters: {
      kind: KIND_FILTER,
      status: STATUS_FILTER,
      target: {
        schema: Type.Union(
          targets.map((target) => Type.Literal(target)),
          { description: 'only imports into this collection' },
        ),
        column: 'target',
        operator: '=',
      },
      ...CREATED_RANGE_FILTERS,
      ...CREATED_BY_FILTER,
    },
  };
  return { OperationSchema, OperationPageSchema, OPERATION_COLLECTION };
}
