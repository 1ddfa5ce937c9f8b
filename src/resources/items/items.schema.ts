import Type, { type Static } from 'typebox';
import { INTEGER_IDS, CREATED_RANGE_FILTERS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import { DisplayName, EchoedReadOnly, RecordFields } from '../../http/schemas.js';
import { CREATED_BY_FILTER, CreatedBy, EchoedCreatedBy } from '../../engine/ownership.js';
import { Price } from './money.js';

export const Sku = Type.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$',
  'x-error': 'must be 1–64 letters, digits, ".", "_", "/" or "-", starting with a letter or digit',
  description: 'stock-keeping unit: unique, compared exactly (case matters)',
});

export const ItemSchema = Type.Object(
  {
    id: RecordFields.id,
    name: DisplayName,
    sku: Sku,
    price: Price,
    created_by: CreatedBy,
    created_at: RecordFields.created_at,
    updated_at: RecordFields.updated_at,
  },
  { additionalProperties: false, xml: { name: 'item' }, title: 'Item' },
);
export type Item = Static<typeof ItemSchema>;

export const ItemCreateSchema = Type.Object(
  { name: DisplayName, sku: Sku, price: Price },
  { additionalProperties: false, xml: { name: 'item' }, title: 'ItemCreate' },
);
export type ItemCreate = Static<typeof ItemCreateSchema>;

export const ItemReplaceSchema = Type.Object(
  { name: DisplayName, sku: Sku, price: Price, ...EchoedReadOnly, ...EchoedCreatedBy },
  { additionalProperties: false, xml: { name: 'item' }, title: 'ItemReplace' },
);
export type ItemReplace = Static<typeof ItemReplaceSchema>;

export const ItemPatchSchema = Type.Object(
  {
    name: Type.Optional(DisplayName),
    sku: Type.Optional(Sku),
    price: Type.Optional(Price),
    ...EchoedReadOnly,
    ...EchoedCreatedBy,
  },
  { additionalProperties: false, xml: { name: 'item' }, title: 'ItemPatch' },
);
export type ItemPatch = Static<typeof ItemPatchSchema>;

export const ItemPageSchema = pageSchema(ItemSchema, 'items');

export const ITEM_COLLECTION: CollectionSpec = {
  ids: INTEGER_IDS,
  sortable: {
    id: 'integer',
    name: 'string',
    sku: 'string',
    price: 'integer',
    created_at: 'string',
    updated_at: 'string',
  },
  filters: {
    sku: { schema: Type.String({ maxLength: 64, description: 'exact SKU' }), column: 'sku', operator: '=' },
    name: { schema: Type.String({ maxLength: 200, description: 'exact name' }), column: 'name', operator: '=' },
    ...CREATED_RANGE_FILTERS,
    ...CREATED_BY_FILTER,
  },
};
