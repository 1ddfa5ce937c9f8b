import { sql, type Kysely } from 'kysely';
import type { Db } from '../database.js';
import { textType } from './portable.js';

/**
 * Record ownership (docs/access.md): every user, item and order records the caller that created
 * it (`created_by`), and every caller says, per resource, whether it sees all records or only its
 * own (`own_records`: the resources it sees only its own records of, space-separated, like its
 * scopes; empty: all, today's behaviour).
 *
 * Records made before owners existed are assigned to the first admin caller (the lowest id), as
 * the one that could have made them; the start logs this when it applies the migration. With no
 * admin they stay without an owner: every caller that sees all records still sees them, none that
 * sees only its own does. No foreign key: a deleted caller's id stays, to say whose the record
 * was, and caller ids are never handed out again (portable.ts addIdColumn).
 *
 * The role `channel` joins the roles the callers table allows. Neither database can change a
 * column's CHECK in place portably, so the role moves into a new column with the wider check
 * (SQLite drops a column together with a CHECK of its own).
 */
export const OWNED_TABLES = ['users', 'items', 'orders'] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const table of OWNED_TABLES) {
    await db.schema.alterTable(table).addColumn('created_by', 'bigint').execute();
    await sql`update ${sql.table(table)} set created_by = (select min(id) from callers where role = 'admin')`.execute(
      db,
    );
    // A caller that sees only its own records lists them by this index, in id order (keyset paging).
    await db.schema.createIndex(`${table}_created_by_id`).on(table).columns(['created_by', 'id']).execute();
  }
  await db.schema
    .alterTable('callers')
    .addColumn('own_records', textType(db), (column) => column.notNull().defaultTo(''))
    .execute();
  await db.schema.alterTable('callers').renameColumn('role', 'previous_role').execute();
  await db.schema
    .alterTable('callers')
    .addColumn('role', textType(db), (column) =>
      column
        .notNull()
        .defaultTo('reader')
        .check(sql`role in ('reader', 'editor', 'admin', 'channel')`),
    )
    .execute();
  await sql`update callers set role = previous_role`.execute(db);
  await db.schema.alterTable('callers').dropColumn('previous_role').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of OWNED_TABLES) {
    await db.schema.dropIndex(`${table}_created_by_id`).execute();
    await db.schema.alterTable(table).dropColumn('created_by').execute();
  }
  await db.schema.alterTable('callers').dropColumn('own_records').execute();
}

/**
 * What up() did, for the start's log, read right after it ran: how many records it found (each
 * now the first admin's), and that admin's id (null: there was none, and they have no owner).
 */
export async function describeAssignedOwners(db: Db): Promise<{ records: number; owner: number | null }> {
  const { rows } = await sql<{ records: number | string; owner: number | string | null }>`
    select (select count(*) from users) + (select count(*) from items) + (select count(*) from orders) as records,
           (select min(id) from callers where role = 'admin') as owner`.execute(db);
  const [row] = rows;
  return {
    records: Number(row?.records ?? 0),
    owner: row?.owner === null || row?.owner === undefined ? null : Number(row.owner),
  };
}
