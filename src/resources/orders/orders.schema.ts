import Type, { type Static } from 'typebox';
import {
  INTEGER_IDS,
  CREATED_RANGE_FILTERS,
  searchFilter,
  pageSchema,
  type CollectionSpec,
} from '../../http/paging.js';
import { DisplayName, EchoedReadOnly, Id, RecordFields, closedObject } from '../../http/schemas.js';
import { Amount, Price } from '../items/money.js';
import { CREATED_BY_FILTER, EchoedCreatedBy, OwnedFields } from '../../engine/ownership.js';

export const MAX_LINES = 100;
export const MAX_LINE_QUANTITY = 1_000_000;

const Status = Type.Union([Type.Literal('placed'), Type.Literal('fulfilled'), Type.Literal('cancelled')], {
  description: 'placed → fulfilled (reserved stock leaves inventory) or placed → cancelled (reserved stock returns)',
});

const LineInput = Type.Object(
  {
    item_id: Type.Integer({ ...Id, description: 'the item ordered' }),
    quantity: Type.Integer({ minimum: 1, maximum: MAX_LINE_QUANTITY, description: `units, 1 to ${MAX_LINE_QUANTITY}` }),
  },
  { additionalProperties: false, title: 'OrderLineInput', xml: { name: 'line' } },
);

const Lines = Type.Array(LineInput, {
  minItems: 1,
  maxItems: MAX_LINES,
  description: `1–${MAX_LINES} lines; lines of the same item are merged into one, of at most ${MAX_LINE_QUANTITY} units`,
  xml: { wrapped: true },
});

export const OrderLineSchema = Type.Object(
  {
    item_id: LineInput.properties.item_id,
    quantity: LineInput.properties.quantity,
    unit_price: Type.String({ ...Price, readOnly: true, description: "the item's price when it was first ordered" }),
    line_total: Type.String({ ...Amount, readOnly: true, description: 'unit_price × quantity' }),
  },
  { additionalProperties: false, title: 'OrderLine', xml: { name: 'line' } },
);

export const OrderSchema = Type.Object(
  {
    id: RecordFields.id,
    name: Type.String({ ...DisplayName, description: "the caller's reference for the order, 1–200 characters" }),
    user_id: Type.Union([Type.Integer({ ...Id, description: 'the user the order is for' }), Type.Null()], {
      description: 'the user the order is for; null once that user has been deleted',
    }),
    status: Status,
    lines: Type.Array(OrderLineSchema, { xml: { wrapped: true } }),
    total: Type.String({ ...Amount, readOnly: true, description: 'sum of the line totals' }),
    ...OwnedFields,
  },
  closedObject('order', 'Order'),
);
export type Order = Static<typeof OrderSchema>;

export const OrderCreateSchema = Type.Object(
  {
    name: OrderSchema.properties.name,
    user_id: Type.Integer({ ...Id, description: 'the user the order is for' }),
    lines: Lines,
  },
  closedObject('order', 'OrderCreate'),
);
export type OrderCreate = Static<typeof OrderCreateSchema>;

/** Read-only order fields a PUT or PATCH may echo back unchanged. */
const EchoedOrder = {
  ...EchoedReadOnly,
  ...EchoedCreatedBy,
  total: Type.Optional(Type.String({ maxLength: 32, readOnly: true })),
};

/** PUT: the writable fields of a placed order; status may be echoed but is changed with PATCH. */
export const OrderReplaceSchema = Type.Object(
  {
    ...OrderCreateSchema.properties,
    status: Type.Optional(
      Type.Union(Status.anyOf, { readOnly: true, description: 'may be echoed; a status changes with PATCH' }),
    ),
    ...EchoedOrder,
  },
  closedObject('order', 'OrderReplace'),
);
export type OrderReplace = Static<typeof OrderReplaceSchema>;

/**
 * PATCH: a status transition, and/or new name, user or lines. The status is any string so that
 * a status the order cannot reach, or one that does not exist, is answered as the 409 it is.
 */
export const OrderPatchSchema = Type.Object(
  {
    name: Type.Optional(OrderSchema.properties.name),
    user_id: Type.Optional(OrderCreateSchema.properties.user_id),
    lines: Type.Optional(Lines),
    status: Type.Optional(
      Type.String({
        maxLength: 64,
        description: 'fulfilled or cancelled, from placed; any other value gives 409',
        examples: ['fulfilled', 'cancelled'],
      }),
    ),
    ...EchoedOrder,
  },
  closedObject('order', 'OrderPatch'),
);
export type OrderPatch = Static<typeof OrderPatchSchema>;

export const OrderPageSchema = pageSchema(OrderSchema, 'orders');

export const ORDER_COLLECTION: CollectionSpec = {
  ids: INTEGER_IDS,
  sortable: { id: 'integer', created_at: 'string', updated_at: 'string', total: 'integer' },
  filters: {
    status: {
      schema: Type.Union(Status.anyOf, { description: 'only orders in this status' }),
      column: 'status',
      operator: '=',
    },
    user_id: {
      schema: Type.Integer({ ...Id, description: 'only orders of this user' }),
      column: 'user_id',
      operator: '=',
    },
    ...searchFilter(['name']),
    ...CREATED_RANGE_FILTERS,
    ...CREATED_BY_FILTER,
  },
};
