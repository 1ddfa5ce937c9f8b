import Type, { type Static } from 'typebox';
import { CREATED_RANGE_FILTERS, INTEGER_IDS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import { IF_MATCH_PATTERN, Id, RecordFields, closedObject } from '../../http/schemas.js';

const MovementKind = Type.Union(
  [Type.Literal('set'), Type.Literal('reserve'), Type.Literal('release'), Type.Literal('fulfil')],
  {
    description:
      'set: quantity set by an inventory system; reserve / release: units held for / returned by an order; fulfil: reserved units left with a fulfilled order',
  },
);

/** Stock of one item (docs/guide.md): quantity is on hand and unreserved; reserved is held by placed orders. */
export const StockQuantity = Type.Integer({
  minimum: 0,
  maximum: 1_000_000_000_000,
  description: 'units on hand and not reserved, 0 to 10¹²',
});

export const StockSchema = Type.Object(
  {
    item_id: Type.Integer({ ...Id, readOnly: true, description: 'the item this stock is of' }),
    quantity: StockQuantity,
    reserved: Type.Integer({ minimum: 0, readOnly: true, description: 'units held by placed orders' }),
    updated_at: RecordFields.updated_at,
  },
  closedObject('stock', 'Stock'),
);
export type Stock = Static<typeof StockSchema>;

export const StockPageSchema = pageSchema(StockSchema, 'stocks');

/** The stock of many items (GET /v1/items/stock?id=…): by item, with the items' ids as `id`. */
export const STOCK_COLLECTION: CollectionSpec = {
  sortable: { item_id: 'integer' },
  defaultSort: 'item_id',
  filters: {},
  ids: { ...INTEGER_IDS, column: 'item_id', says: 'item ids' },
};

/** Read-only stock fields a PUT or PATCH may echo back unchanged. */
const EchoedStock = {
  item_id: Type.Optional(Type.Integer({ ...Id, readOnly: true })),
  reserved: Type.Optional(Type.Integer({ minimum: 0, readOnly: true })),
  updated_at: Type.Optional(RecordFields.updated_at),
};

export const StockReplaceSchema = Type.Object(
  { quantity: StockQuantity, ...EchoedStock },
  closedObject('stock', 'StockReplace'),
);
export const StockPatchSchema = Type.Object(
  { quantity: Type.Optional(StockQuantity), ...EchoedStock },
  closedObject('stock', 'StockPatch'),
);
export type StockChange = Static<typeof StockPatchSchema>;

const BatchItemId = Type.Integer({ ...Id, description: 'the item whose stock the entry sets' });
const EntryIfMatch = Type.String({
  maxLength: 512,
  pattern: IF_MATCH_PATTERN,
  description: "the stock's ETag the entry is conditional on, as If-Match on PUT (stale: 409, nothing stored)",
});

/** A batch's `set` entry: PUT /v1/items/{item_id}/stock with `quantity`. */
export const StockSetEntrySchema = Type.Object(
  { item_id: BatchItemId, quantity: StockQuantity, if_match: Type.Optional(EntryIfMatch) },
  { additionalProperties: false, title: 'StockBatchSet' },
);
export type StockSetEntry = Static<typeof StockSetEntrySchema>;

/** A batch's `adjust` entry: `by` units more (or fewer, when negative) on hand. */
export const StockAdjustEntrySchema = Type.Object(
  {
    item_id: BatchItemId,
    by: Type.Integer({
      minimum: -1_000_000_000_000,
      maximum: 1_000_000_000_000,
      description: 'units to add to the on-hand quantity (negative: to take); below 0 is 409 insufficient-stock',
    }),
    if_match: Type.Optional(EntryIfMatch),
  },
  { additionalProperties: false, title: 'StockBatchAdjust' },
);
export type StockAdjustEntry = Static<typeof StockAdjustEntrySchema>;

export const MovementSchema = Type.Object(
  {
    id: RecordFields.id,
    item_id: Type.Integer({ ...Id, description: 'the item whose stock moved' }),
    kind: MovementKind,
    quantity_change: Type.Integer({ description: 'change of the on-hand, unreserved quantity' }),
    reserved_change: Type.Integer({ description: 'change of the reserved quantity' }),
    quantity_after: Type.Integer({ minimum: 0 }),
    reserved_after: Type.Integer({ minimum: 0 }),
    order_id: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
      description: 'the order that caused the movement; null for set',
    }),
    created_at: RecordFields.created_at,
  },
  closedObject('movement', 'StockMovement'),
);
export type Movement = Static<typeof MovementSchema>;

export const MovementPageSchema = pageSchema(MovementSchema, 'movements');

export const MOVEMENT_COLLECTION: CollectionSpec = {
  ids: INTEGER_IDS,
  sortable: { id: 'integer' },
  defaultSort: '-id',
  filters: {
    kind: {
      schema: Type.Union(MovementKind.anyOf, { description: 'only movements of this kind' }),
      column: 'kind',
      operator: '=',
    },
    order_id: {
      schema: Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'only movements caused by this order',
      }),
      column: 'order_id',
      operator: '=',
    },
    ...CREATED_RANGE_FILTERS,
  },
};
