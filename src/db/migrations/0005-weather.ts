import { sql, type CreateTableBuilder, type Kysely } from 'kysely';
import { addVersionColumns, createSortIndexes, textType, createIdTable, required } from './portable.js';

/**
 * Places and their recorded weather observations.
 *
 * A place keeps a copy of its latest observation (the one with the greatest observed_at), so
 * reading a place's weather is one row; observations keep the whole history. One observation
 * per place and instant: a feed that sends the same observation again corrects it instead of
 * adding a second one, which keeps PUT idempotent. Measurements are double precision (not
 * PostgreSQL's 4-byte real, which would turn 21.3 into 21.299999). CHECK constraints repeat the
 * ranges the API enforces (upstream/ranges.ts), written out: a migration never changes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  const measurements = <T extends string>(table: CreateTableBuilder<T>, nullable: boolean) =>
    table
      .addColumn('temperature_c', 'double precision', (column) =>
        (nullable ? column : column.notNull()).check(sql`temperature_c between -100 and 70`),
      )
      .addColumn('humidity_pct', 'double precision', (column) =>
        (nullable ? column : column.notNull()).check(sql`humidity_pct between 0 and 100`),
      )
      .addColumn('wind_kph', 'double precision', (column) =>
        (nullable ? column : column.notNull()).check(sql`wind_kph between 0 and 500`),
      )
      .addColumn('conditions', text, (column) => (nullable ? column : column.notNull()))
      .addColumn('observed_at', text, (column) => (nullable ? column : column.notNull()))
      .addColumn('source', text, (column) => (nullable ? column : column.notNull()));

  await createIdTable(db, 'places')
    // The slug, lower-cased: the unique key that makes place names case-insensitive.
    .$call(required(text, ['place', 'name']))
    .addColumn('latitude', 'double precision', (column) => column.check(sql`latitude between -90 and 90`))
    .addColumn('longitude', 'double precision', (column) => column.check(sql`longitude between -180 and 180`))
    .$call((table) => measurements(table, true))
    .$call((table) => addVersionColumns(db, table))
    .addCheckConstraint('places_coordinates_together', sql`(latitude is null) = (longitude is null)`)
    .execute();
  await db.schema.createIndex('places_place_unique').on('places').column('place').unique().execute();
  await createSortIndexes(db, 'places', ['name', 'created_at', 'updated_at']);

  await createIdTable(db, 'observations')
    .addColumn('place_id', 'bigint', (column) => column.notNull().references('places.id').onDelete('cascade'))
    .$call((table) => measurements(table, false))
    .$call(required(text, ['created_at', 'updated_at']))
    .execute();
  // History is read newest first; the unique key is also that index.
  await db.schema
    .createIndex('observations_place_id_observed_at')
    .on('observations')
    .columns(['place_id', 'observed_at'])
    .unique()
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['observations', 'places']) await db.schema.dropTable(table).execute();
}
