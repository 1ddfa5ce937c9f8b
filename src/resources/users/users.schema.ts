import Type, { type Static } from 'typebox';
import { INTEGER_IDS, CREATED_RANGE_FILTERS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import { DisplayName, EchoedReadOnly, RecordFields } from '../../http/schemas.js';
import { CREATED_BY_FILTER, CreatedBy, EchoedCreatedBy } from '../../engine/ownership.js';

const Name = DisplayName;

const Email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'unique, compared case-insensitively',
});

export const UserSchema = Type.Object(
  {
    id: RecordFields.id,
    name: Name,
    email: Email,
    created_by: CreatedBy,
    created_at: RecordFields.created_at,
    updated_at: RecordFields.updated_at,
  },
  { additionalProperties: false, xml: { name: 'user' }, title: 'User' },
);
export type User = Static<typeof UserSchema>;

/** POST: the writable fields; read-only ones are refused like any unknown field. */
export const UserCreateSchema = Type.Object(
  { name: Name, email: Email },
  { additionalProperties: false, xml: { name: 'user' }, title: 'UserCreate' },
);
export type UserCreate = Static<typeof UserCreateSchema>;

/** PUT: every writable field. */
export const UserReplaceSchema = Type.Object(
  { name: Name, email: Email, ...EchoedReadOnly, ...EchoedCreatedBy },
  { additionalProperties: false, xml: { name: 'user' }, title: 'UserReplace' },
);
export type UserReplace = Static<typeof UserReplaceSchema>;

/** PATCH (JSON Merge Patch, RFC 7396): any writable field; null would remove a required field, so it is refused. */
export const UserPatchSchema = Type.Object(
  { name: Type.Optional(Name), email: Type.Optional(Email), ...EchoedReadOnly, ...EchoedCreatedBy },
  { additionalProperties: false, xml: { name: 'user' }, title: 'UserPatch' },
);
export type UserPatch = Static<typeof UserPatchSchema>;

export const UserPageSchema = pageSchema(UserSchema, 'users');

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
    ...CREATED_RANGE_FILTERS,
    ...CREATED_BY_FILTER,
  },
};
