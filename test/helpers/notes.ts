import type { Kysely } from 'kysely';
import Type, { type Static } from 'typebox';
import {
  addVersionColumns,
  createIdTable,
  createSortIndexes,
  required,
  textType,
} from '../../src/db/migrations/portable.js';
import { CREATED_BY_FILTER } from '../../src/engine/ownership.js';
import { ownedRecordSchemas } from '../../src/engine/record-schemas.js';
import { recordImport } from '../../src/engine/imports/record-import.js';
import { recordService } from '../../src/engine/records.js';
import { resourceRoutes, type ResourceModule } from '../../src/engine/resource.js';
import { CREATED_RANGE_FILTERS, INTEGER_IDS } from '../../src/http/paging.js';
import { startApp, type TestApp } from './app.js';

// A resource declared only in the tests (docs/architecture.md "Adding a resource"): notes, with a
// title and a text, owned by the caller that created them. Its table is made by the test; everything
// else comes from the engine, which names no note anywhere.
const Title = Type.String({ minLength: 1, maxLength: 200, description: 'what the note is about' });
const Text = Type.String({ maxLength: 2000, description: 'the note itself' });
const NOTE = ownedRecordSchemas('note', 'Note', 'notes', { title: Title, text: Text });
type StoredNote = Static<typeof NOTE.record> & { version: number };
const NOTE_COLUMNS = ['id', 'title', 'text', 'created_by', 'created_at', 'updated_at', 'version'] as const;
const NOTES = recordService<StoredNote, Static<typeof NOTE.create>>({
  resource: 'notes',
  path: '/v1/notes',
  noun: 'Note',
  table: 'notes',
  columns: NOTE_COLUMNS,
  writable: { title: (title) => title, text: (text) => text },
  events: { created: 'note.created', updated: 'note.updated', deleted: 'note.deleted' },
});
const NOTES_MODULE: ResourceModule = {
  access: { name: 'notes', owned: true, actingMayCreate: true },
  events: {
    'note.created': { resource: 'notes', description: 'A note was created; data is the note.' },
    'note.updated': { resource: 'notes', description: 'A note was changed; data is the note.' },
    'note.deleted': { resource: 'notes', description: 'A note was deleted; data holds its id.' },
  },
  routes: resourceRoutes({
    collection: {
      path: '/v1/notes',
      name: 'notes',
      singular: 'Note',
      article: 'a',
      listing: {
        ids: INTEGER_IDS,
        sortable: { id: 'integer', title: 'string', created_at: 'string' },
        filters: { ...CREATED_RANGE_FILTERS, ...CREATED_BY_FILTER },
      },
      record: NOTE.record,
      page: NOTE.page,
      exports: true,
    },
    service: NOTES,
    create: { summary: 'Create a note', body: NOTE.create },
    replace: NOTE.replace,
    patch: NOTE.patch,
    remove: { summary: 'Delete a note' },
    batch: { description: 'Two entries may not name one note.' },
  }),
  import: recordImport(NOTES, {
    scopes: ['notes:create'],
    columns: ['title', 'text'],
    required: ['title', 'text'],
    example: { title: 'Stock count', text: 'Count the shelves on Friday.' },
    schema: NOTE.create,
  }),
};

/** The notes table, as a migration of the application that declares them would make it. */
async function createNotesTable(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await createIdTable(db, 'notes')
    .$call(required(text, ['title', 'text']))
    .addColumn('created_by', 'bigint')
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await createSortIndexes(db, 'notes', ['title', 'created_at', 'created_by']);
}

/**
 * Starts the app with notes on a fresh database of the run's backend, their table made; the app
 * declares their scopes, owner rule and event types, and closing it undoes them.
 */
export function startNotesApp(settings: Record<string, string> = {}): Promise<TestApp> {
  return startApp(settings, undefined, {
    resources: [NOTES_MODULE],
    prepare: (storage) => createNotesTable(storage.db as unknown as Kysely<unknown>),
  });
}
