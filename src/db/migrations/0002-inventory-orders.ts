import { sql, type Kysely } from 'kysely';
import { addVersionColumns, createSortIndexes, textType, createIdTable, required } from './portable.js';

/**
 * Items, their stock, the stock ledger, and orders with their lines.
 *
 * Money columns (price, unit_price, total) hold integer minor units (cents), never floats.
 * CHECK constraints repeat the rules the services enforce, so no bug can store a negative stock.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await createIdTable(db, 'items')
    .$call(required(text, ['name', 'sku']))
    .addColumn('price', 'bigint', (column) => column.notNull().check(sql`price >= 0`))
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await db.schema.createIndex('items_sku_unique').on('items').column('sku').unique().execute();
  await createSortIndexes(db, 'items', ['name', 'price', 'created_at']);

  // quantity: on hand and unreserved; reserved: held by placed orders; fulfilled: units that
  // left with fulfilled orders. quantity + reserved + fulfilled = everything ever put in.
  await db.schema
    .createTable('stock')
    .addColumn('item_id', 'bigint', (column) => column.primaryKey().references('items.id').onDelete('cascade'))
    .addColumn('quantity', 'bigint', (column) => column.notNull().check(sql`quantity >= 0`))
    .addColumn('reserved', 'bigint', (column) => column.notNull().check(sql`reserved >= 0`))
    .addColumn('fulfilled', 'bigint', (column) => column.notNull().check(sql`fulfilled >= 0`))
    .addColumn('version', 'integer', (column) => column.notNull().defaultTo(1))
    .addColumn('updated_at', text, (column) => column.notNull())
    .execute();

  await createIdTable(db, 'orders')
    .addColumn('name', text, (column) => column.notNull())
    // SET NULL: a user whose orders are all closed may be deleted; the orders stay as history.
    .addColumn('user_id', 'bigint', (column) => column.references('users.id').onDelete('set null'))
    .addColumn('status', text, (column) => column.notNull().check(sql`status in ('placed', 'fulfilled', 'cancelled')`))
    .addColumn('total', 'bigint', (column) => column.notNull().check(sql`total >= 0`))
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await db.schema.createIndex('orders_user_id_status').on('orders').columns(['user_id', 'status']).execute();
  await createSortIndexes(db, 'orders', ['status', 'created_at', 'total']);

  // An item on any order (open or closed) cannot be deleted: the order would lose its meaning.
  await db.schema
    .createTable('order_lines')
    .addColumn('order_id', 'bigint', (column) => column.notNull().references('orders.id').onDelete('cascade'))
    .addColumn('item_id', 'bigint', (column) => column.notNull().references('items.id').onDelete('restrict'))
    .addColumn('position', 'integer', (column) => column.notNull())
    .addColumn('quantity', 'bigint', (column) => column.notNull().check(sql`quantity >= 1`))
    .addColumn('unit_price', 'bigint', (column) => column.notNull().check(sql`unit_price >= 0`))
    .addPrimaryKeyConstraint('order_lines_pk', ['order_id', 'item_id'])
    .execute();
  await db.schema.createIndex('order_lines_item_id').on('order_lines').column('item_id').execute();

  // The ledger outlives the orders it names (an order may be deleted), so order_id is no key.
  await createIdTable(db, 'stock_movements')
    .addColumn('item_id', 'bigint', (column) => column.notNull().references('items.id').onDelete('cascade'))
    .addColumn('kind', text, (column) => column.notNull().check(sql`kind in ('set', 'reserve', 'release', 'fulfil')`))
    .$call(required('bigint', ['quantity_change', 'reserved_change', 'quantity_after', 'reserved_after']))
    .addColumn('order_id', 'bigint')
    .addColumn('created_at', text, (column) => column.notNull())
    .execute();
  await db.schema.createIndex('stock_movements_item_id_id').on('stock_movements').columns(['item_id', 'id']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['stock_movements', 'order_lines', 'orders', 'stock', 'items'])
    await db.schema.dropTable(table).execute();
}
