import Type, { type Static } from 'typebox';
import { INTEGER_IDS, CREATED_RANGE_FILTERS, searchFilter, type CollectionSpec } from '../../http/paging.js';
import { DisplayName } from '../../http/schemas.js';
import { CREATED_BY_FILTER } from '../../engine/ownership.js';
import { ownedRecordSchemas } from '../../engine/record-schemas.js';
import { Price } from './money.js';

export const Sku = Type.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$',
  'x-error': 'must be 1–64 letters, digits, ".", "_", "/" or "-", starting with a letter or digit',
  description: 'stock-keeping unit: unique, compared exactly (case matters)',
});

/**
 * The item as answered, a page of them, and the bodies of a create (the writable fields), a replace and a
 * change (engine/record-schemas.ts).
 */
export const ITEM = ownedRecordSchemas('item', 'Item', 'items', { name: DisplayName, sku: Sku, price: Price });
export const ItemSchema = ITEM.record;
export type Item = Static<typeof ITEM.record>;
export type ItemCreate = Static<typeof ITEM.create>;

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
    ...searchFilter(['name', 'sku']),
    ...CREATED_RANGE_FILTERS,
    ...CREATED_BY_FILTER,
  },
};
