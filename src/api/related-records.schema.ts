import Type, { type TSchema } from 'typebox';
import type { Expandable } from '../http/expand.js';
import { pageSchema } from '../http/paging.js';
import { ItemSchema } from '../resources/items/items.schema.js';
import { MovementSchema, StockSchema } from '../resources/items/stock.schema.js';
import { OrderLineSchema, OrderSchema } from '../resources/orders/orders.schema.js';
import { UserSchema } from '../resources/users/users.schema.js';
import { closedObject } from '../http/schemas.js';

/**
 * What `expand=` may embed (docs/reading.md "Related records in one call"), and the shapes of
 * records with their related records embedded. The relations are stated once, between resources
 * (each named as its scopes are: embedding a record of `users` needs users:read); the paths each
 * operation offers, its `expand` parameter and its checks follow from them (http/expand.ts). A
 * relation that leads back (a stock's item) is there so that a path around it is refused as the
 * cycle it is.
 */
const RELATIONS = {
  orders: { user: 'users', 'lines.item': 'items' },
  items: { stock: 'stock' },
  stock: { item: 'items' },
  'stock-movements': { order: 'orders' },
} as const;

/** An order's: user, lines.item, lines.item.stock. */
export const ORDER_RELATIONS: Expandable = { root: 'orders', relations: RELATIONS };
/** A stock movement's: order, order.user, order.lines.item. */
export const MOVEMENT_RELATIONS: Expandable = { root: 'stock-movements', relations: RELATIONS };

/** An expanded member: present only when `expand` names it; null when the caller may not see the record. */
function related<Schema extends TSchema>(schema: Schema, what: string) {
  return Type.Optional(
    Type.Union([schema, Type.Null()], {
      description: `${what}, present only when expand names it; null when there is none or the caller may not see it`,
    }),
  );
}

/** `members` with `extra` inserted right after the member `after`. */
function withAfter(members: Record<string, TSchema>, after: string, extra: Record<string, TSchema>) {
  return Object.fromEntries(
    Object.entries(members).flatMap(([name, schema]) => [
      [name, schema],
      ...(name === after ? Object.entries(extra) : []),
    ]),
  );
}

/**
 * A page of expandable records, under the page's name before expand= (OrderPage): what a list
 * answers is the same page, whose records may now hold more (the document changes additively).
 */
function pageTitled(item: TSchema, root: string, title: string) {
  const page = pageSchema(item, root);
  return Type.Object(page.properties, { additionalProperties: false, xml: { name: root }, title });
}

export const ExpandedItemSchema = Type.Object(
  {
    ...ItemSchema.properties,
    // The item's stock, present only when expand names lines.item.stock (every item has one).
    stock: Type.Optional(StockSchema),
  },
  closedObject('item', 'ExpandedItem'),
);

const ExpandedLineSchema = Type.Object(
  { ...OrderLineSchema.properties, item: related(ExpandedItemSchema, 'the item (expand=lines.item)') },
  closedObject('line', 'ExpandedOrderLine'),
);

/** An order as GET answers it: its user and its lines' items embedded when `expand` names them. */
export const ExpandedOrderSchema = Type.Object(
  withAfter(
    { ...OrderSchema.properties, lines: Type.Array(ExpandedLineSchema, { xml: { wrapped: true } }) },
    'user_id',
    {
      user: related(UserSchema, 'the user (expand=user)'),
    },
  ),
  closedObject('order', 'ExpandedOrder'),
);
export const ExpandedOrderPageSchema = pageTitled(ExpandedOrderSchema, 'orders', 'OrderPage');

/** A stock movement as its list answers it: its order embedded when `expand` names it. */
export const ExpandedMovementSchema = Type.Object(
  withAfter(MovementSchema.properties, 'order_id', { order: related(ExpandedOrderSchema, 'the order (expand=order)') }),
  closedObject('movement', 'ExpandedStockMovement'),
);
export const ExpandedMovementPageSchema = pageTitled(ExpandedMovementSchema, 'movements', 'StockMovementPage');
