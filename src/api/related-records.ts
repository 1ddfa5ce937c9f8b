import type { FastifyRequest } from 'fastify';
import type { Static, TObject } from 'typebox';
import { challenge } from '../auth/challenge.js';
import { sightOf } from '../auth/visibility.js';
import type { Executor } from '../db/database.js';
import type { ListQuery } from '../db/keyset.js';
import { AppError } from '../errors.js';
import { expandablePaths, expands, parseExpand, pathsUnder, type Expandable } from '../http/expand.js';
import { MAX_IDS, type Page } from '../http/paging.js';
import { ItemSchema, type Item } from '../resources/items/items.schema.js';
import { listItems } from '../resources/items/items.service.js';
import { StockSchema, type Movement, type Stock } from '../resources/items/stock.schema.js';
import { listStock } from '../resources/items/stock.service.js';
import { listOrders, type OrderView } from '../resources/orders/orders.service.js';
import type { Expanded, Expansion } from '../engine/reading/expansion.js';
import { readerOf, type Reader } from '../engine/reading/references.js';
import { UserSchema, type User } from '../resources/users/users.schema.js';
import { listUsers, USERS, type StoredUser } from '../resources/users/users.service.js';
import {
  ExpandedMovementPageSchema,
  ExpandedMovementSchema,
  ExpandedOrderPageSchema,
  ExpandedOrderSchema,
  MOVEMENT_RELATIONS,
  ORDER_RELATIONS,
} from './related-records.schema.js';

/**
 * Embedding related records (docs/reading.md "Related records in one call"): each embedded record
 * is read as if it were read on its own: the caller needs the read scope of its resource (403
 * naming the path otherwise, checked before anything is read), and it is read through the same
 * list query as `?id=`, so the caller's sight applies (auth/visibility.ts): a record the caller may
 * not see is embedded as null, as one that does not exist. A page's records of one path are read
 * in one query (`where id in (…)`, by MAX_IDS ids), never one query per record, and never more
 * than the page refers to.
 */

/** 403 insufficient-scope, naming each path the caller may not expand and the scopes it lacks. */
export function assertMayExpand(spec: Expandable, paths: readonly string[], request: FastifyRequest): void {
  const reader = readerOf(request);
  const refused = parseExpand(spec, [...paths])
    .map((path) => ({
      path: path.path,
      missing: path.resources.map(scopeOf).filter((scope) => !reader.scopes.has(scope)),
    }))
    .filter((path) => path.missing.length > 0);
  if (refused.length === 0) return;
  const missing = [...new Set(refused.flatMap((path) => path.missing))];
  const detail = `${reader.name} may not expand ${refused.map((path) => path.path).join(', ')}: it lacks ${missing.join(' and ')}, and is not shown those records.`;
  throw new AppError('insufficient-scope', detail, {
    headers: { 'www-authenticate': challenge('insufficient_scope', detail, missing.join(' ')) },
    extensions: { required_scopes: missing },
    errors: refused.map((path) => ({
      in: 'query' as const,
      pointer: '#/expand',
      detail: `${path.path} needs ${path.missing.join(' and ')}`,
    })),
  });
}

const scopeOf = (resource: string) => `${resource}:read`;

/** The records of `ids` that `list` finds (its filters and sight), by MAX_IDS ids a query. */
async function readByIds<Row>(
  ids: readonly number[],
  column: string,
  list: (query: ListQuery) => Promise<Page<Row>>,
): Promise<Row[]> {
  const rows: Row[] = [];
  for (let start = 0; start < ids.length; start += MAX_IDS) {
    const chunk = ids.slice(start, start + MAX_IDS);
    const page = await list({
      limit: chunk.length,
      order: [{ column, direction: 'asc' }],
      conditions: [{ column, operator: 'in', value: chunk }],
      after: undefined,
    });
    rows.push(...page.rows);
  }
  return rows;
}

/**
 * The members a schema answers, of a record read with more (its version, its stock's fulfilled
 * count): an embedded record is matched against its schema's branch of `anyOf` (or null), which
 * takes no other member.
 */
function only<Schema extends TObject>(schema: Schema) {
  const members = Object.keys(schema.properties);
  return <Row extends object>(row: Row) =>
    Object.fromEntries(
      members.filter((member) => member in row).map((member) => [member, row[member as keyof Row]]),
    ) as Static<Schema>;
}
const asUser = only(UserSchema);
const asItem = only(ItemSchema);
const asStock = only(StockSchema);
const asOrder = only(ExpandedOrderSchema);

const distinct = (ids: (number | null)[]) => [...new Set(ids.filter((id): id is number => id !== null))];

/** The users of `ids` the reader sees; one user (an order's read) by the compiled read of one record. */
async function readUsers(db: Executor, ids: number[], reader: Reader): Promise<StoredUser[]> {
  const sight = sightOf(reader, 'users');
  if (ids.length !== 1) return readByIds(ids, 'id', (query) => listUsers(db, query, sight));
  const user = await USERS.queries.findById(db, ids[0]!, sight);
  return user ? [user] : [];
}

type Line = OrderView['lines'][number];
export type ExpandedOrder = Omit<OrderView, 'lines'> & {
  user?: User | null;
  lines: (Line & { item?: (Item & { stock?: Stock }) | null })[];
};

/** The orders with what `paths` (relative to an order: user, lines.item, lines.item.stock) embed. */
export async function expandOrders(
  db: Executor,
  orders: OrderView[],
  paths: readonly string[],
  reader: Reader,
): Promise<Expanded<ExpandedOrder>> {
  const itemsSight = sightOf(reader, 'items');
  const itemIds = distinct(orders.flatMap((order) => order.lines.map((line) => line.item_id)));
  // The paths' reads are independent (a stock is read through its item, with the same sight): at once.
  const [foundUsers, foundItems, stocks] = await Promise.all([
    expands(paths, 'user') ? readUsers(db, distinct(orders.map((order) => order.user_id)), reader) : undefined,
    expands(paths, 'lines.item') ? readByIds(itemIds, 'id', (query) => listItems(db, query, itemsSight)) : undefined,
    expands(paths, 'lines.item.stock')
      ? readByIds(itemIds, 'item_id', (query) => listStock(db, query, itemsSight))
      : undefined,
  ]);
  const users = foundUsers && new Map(foundUsers.map((user) => [user.id, asUser(user)]));
  const stockOf = new Map((stocks ?? []).map((stock) => [stock.item_id, asStock(stock)]));
  const items =
    foundItems &&
    new Map<number, Item & { stock?: Stock }>(
      foundItems.map((item) => [item.id, { ...asItem(item), ...(stocks ? { stock: stockOf.get(item.id)! } : {}) }]),
    );
  const embedded = [
    ...(foundUsers ?? []).map((user) => `u${user.id}:${user.version}`),
    ...(foundItems ?? []).map((item) => `i${item.id}:${item.version}`),
    ...(stocks ?? []).map((stock) => `s${stock.item_id}:${stock.version}`),
  ];
  const rows = orders.map((order) => ({
    ...order,
    ...(users ? { user: (order.user_id === null ? undefined : users.get(order.user_id)) ?? null } : {}),
    lines: items ? order.lines.map((line) => ({ ...line, item: items.get(line.item_id) ?? null })) : order.lines,
  }));
  return { rows, embedded: embedded.join(',') };
}

/** The movements with their orders (and what `order.…` paths embed of them), as `paths` say. */
export async function expandMovements<Movement extends { order_id: number | null }>(
  db: Executor,
  movements: Movement[],
  paths: readonly string[],
  reader: Reader,
): Promise<Expanded<Movement & { order?: ExpandedOrder | null }>> {
  if (!expands(paths, 'order')) return { rows: movements, embedded: '' };
  const ids = distinct(movements.map((movement) => movement.order_id));
  const found = await readByIds(ids, 'id', (query) => listOrders(db, query, sightOf(reader, 'orders')));
  const orders = await expandOrders(db, found, pathsUnder(paths, 'order'), reader);
  const byId = new Map(orders.rows.map((order) => [order.id, asOrder(order) as ExpandedOrder]));
  const rows = movements.map((movement) => ({
    ...movement,
    order: (movement.order_id === null ? undefined : byId.get(movement.order_id)) ?? null,
  }));
  const versions = found.map((order) => `o${order.id}:${order.version}`);
  return { rows, embedded: [...versions, orders.embedded].join(',') };
}

/**
 * An expansion as a collection declares it: its relations, the expanded record and page, and how
 * rows are expanded for a reader; what `fields` may select and the permission check follow from them.
 */
function expansionOf<Row>(
  relations: Expandable,
  record: TObject,
  page: TObject,
  expand: (db: Executor, rows: Row[], paths: readonly string[], reader: Reader) => Promise<Expanded<unknown>>,
): Expansion<Row> {
  return {
    relations,
    record,
    page,
    selectable: { record, embedded: expandablePaths(relations) },
    check: (paths, request) => assertMayExpand(relations, paths, request),
    expand: (db, rows, paths, request) => expand(db, rows, paths, readerOf(request)),
  };
}

/** The expansion of orders, as the list and the read of orders declare it. */
export const ORDER_EXPANSION = expansionOf<OrderView>(
  ORDER_RELATIONS,
  ExpandedOrderSchema,
  ExpandedOrderPageSchema,
  expandOrders,
);

/** The expansion of stock movements (their list): order, order.user, order.lines.item. */
export const MOVEMENT_EXPANSION = expansionOf<Movement>(
  MOVEMENT_RELATIONS,
  ExpandedMovementSchema,
  ExpandedMovementPageSchema,
  expandMovements,
);
