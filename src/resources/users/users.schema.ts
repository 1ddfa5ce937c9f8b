import Type, { type Static } from 'typebox';
import { INTEGER_IDS, CREATED_RANGE_FILTERS, searchFilter, type CollectionSpec } from '../../http/paging.js';
import { DisplayName } from '../../http/schemas.js';
import { CREATED_BY_FILTER } from '../../engine/ownership.js';
import { ownedRecordSchemas } from '../../engine/record-schemas.js';

const Name = DisplayName;

const Email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'unique, compared case-insensitively',
});

/**
 * The user as answered, a page of them, and the bodies of a create (the writable fields), a replace and a
 * change (engine/record-schemas.ts).
 */
export const USER = ownedRecordSchemas('user', 'User', 'users', { name: Name, email: Email });
export const UserSchema = USER.record;
export type User = Static<typeof USER.record>;
export type UserCreate = Static<typeof USER.create>;

export const USER_COLLECTION: CollectionSpec = {
  ids: INTEGER_IDS,
  sortable: { id: 'integer', name: 'string', email: 'string', created_at: 'string', updated_at: 'string' },
  filters: {
    email: {
      schema: Type.String({ maxLength: 254, description: 'exact email, case-insensitive' }),
      column: 'email_key',
      operator: '=',
      normalize: (value: string) => value.toLowerCase(),
    },
    name: { schema: Type.String({ maxLength: 200, description: 'exact name' }), column: 'name', operator: '=' },
    ...searchFilter(['name', 'email']),
    ...CREATED_RANGE_FILTERS,
    ...CREATED_BY_FILTER,
  },
};
