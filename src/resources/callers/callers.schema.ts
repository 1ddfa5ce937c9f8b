import Type, { type Static } from 'typebox';
import { CREDENTIALS } from '../../auth/access.js';
import { ALL_SCOPES, OWNED_RESOURCES, ROLES } from '../../auth/policy.js';
import { freeText } from '../../http/free-text.js';
import { CREATED_RANGE_FILTERS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import {
  EchoedReadOnly,
  Id,
  RecordFields,
  Timestamp,
  builtPerCatalogue,
  oneOfLiterals,
  closedObject,
} from '../../http/schemas.js';

/** A caller's name: also its OAuth client_id, so it is kept to characters that need no escaping. */
export const CALLER_NAME_PATTERN = '^[a-z0-9][a-z0-9._-]*$';

const CallerName = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: CALLER_NAME_PATTERN,
  'x-error': 'must be 1–64 lower-case letters, digits, dots, hyphens or underscores, starting with a letter or digit',
  description: 'unique name of the calling system (sales-system); also its OAuth client_id',
});

const Role = oneOfLiterals(ROLES, {
  description:
    'reader: read everything; editor: read, create and update; admin: everything, including delete and caller management; channel: a sales channel: place and read its own orders for its own users (customers), read items and stock',
});

const Access = Type.Union([Type.Literal('all'), Type.Literal('own')]);

const RateLimit = Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000_000 }), Type.Null()], {
  description: "requests per minute this caller may make; null: its role's default (docs/limits.md)",
});

/**
 * The caller's schemas, which name every scope and every owned resource: built from the
 * catalogues there are when the routes are registered, so a resource declared before the app is
 * built has its scopes and its record access.
 */
export const callerSchemas = builtPerCatalogue(
  () => `${ALL_SCOPES.join(' ')} | ${OWNED_RESOURCES.join(' ')}`,
  () => {
    const ScopeName = oneOfLiterals(ALL_SCOPES, { title: 'Scope', description: 'a scope: <resource>:<action>' });

    const ScopeList = (description: string) =>
      Type.Array(ScopeName, { maxItems: ALL_SCOPES.length, uniqueItems: true, description, xml: { wrapped: true } });

    /** Per owned resource, whether the caller sees every record or only those it created (docs/access.md). */
    const RecordAccess = Type.Object(
      Object.fromEntries(
        OWNED_RESOURCES.map((resource) => [
          resource,
          Type.Union(Access.anyOf, { description: `all or own ${resource}` }),
        ]),
      ),
      {
        additionalProperties: false,
        title: 'RecordAccess',
        description:
          'per resource, whether the caller sees all records (all) or only those it created (own), whatever the action; a record it may not see is 404 to it, as if it did not exist',
      },
    );

    /** The same, as a body sets it: the resources named change, the others stay (or take the role's default on creation). */
    const RecordAccessChange = Type.Partial(RecordAccess, {
      additionalProperties: false,
      title: 'RecordAccessChange',
      description:
        "the resources named change; the others keep theirs (on creation, or with a new role: the role's default, own users and orders for channel, all for the other roles)",
    });

    const CallerSchema = Type.Object(
      {
        id: RecordFields.id,
        name: CallerName,
        role: Role,
        extra_scopes: ScopeList("scopes granted beyond the role's (caller management cannot be granted)"),
        removed_scopes: ScopeList('scopes of the role taken away'),
        scopes: Type.Array(ScopeName, {
          readOnly: true,
          description: 'what the caller may do: role + extra − removed',
          xml: { wrapped: true },
        }),
        record_access: RecordAccess,
        rate_limit: RateLimit,
        created_at: RecordFields.created_at,
        updated_at: RecordFields.updated_at,
      },
      closedObject('caller', 'Caller'),
    );

    const CallerCreateSchema = Type.Object(
      {
        name: CallerName,
        role: Role,
        extra_scopes: Type.Optional(ScopeList("scopes granted beyond the role's")),
        removed_scopes: Type.Optional(ScopeList('scopes of the role taken away')),
        record_access: Type.Optional(RecordAccessChange),
        rate_limit: Type.Optional(RateLimit),
      },
      closedObject('caller', 'CallerCreate'),
    );

    const CallerPatchSchema = Type.Object(
      {
        name: Type.Optional(CallerName),
        role: Type.Optional(Role),
        extra_scopes: Type.Optional(ScopeList("scopes granted beyond the role's; replaces the list")),
        removed_scopes: Type.Optional(ScopeList('scopes of the role taken away; replaces the list')),
        record_access: Type.Optional(RecordAccessChange),
        rate_limit: Type.Optional(RateLimit),
        scopes: Type.Optional(
          Type.Array(ScopeName, {
            readOnly: true,
            maxItems: ALL_SCOPES.length * 2,
            description:
              'read-only: may be echoed as read (in any order); 422 when it differs from what role and grants add up to',
          }),
        ),
        ...EchoedReadOnly,
      },
      closedObject('caller', 'CallerPatch'),
    );

    const CallerPageSchema = pageSchema(CallerSchema, 'callers');

    /** Who a request is, as its credential resolved (GET /v1/callers/me): what it holds now, not what its caller may hold. */
    const IdentitySchema = Type.Object(
      {
        caller_id: Type.Union([Id, Type.Null()], {
          description: "the caller's id; null for the subject of an external issuer's token",
        }),
        name: Type.String({ description: "the caller's name, or the subject (sub) of an external issuer's token" }),
        role: Type.Union([...Role.anyOf, Type.Null()], {
          description: "the caller's role; null for the subject of an external issuer's token",
        }),
        credential: oneOfLiterals(CREDENTIALS, {
          description:
            'what signed the request: api_key (X-API-Key), oauth (a token from POST /oauth/token), external (a token of the configured external issuer)',
        }),
        scopes: Type.Array(ScopeName, {
          description:
            "the scopes this request holds, sorted: a key's are its caller's; a token's are those it was issued with that its caller still holds (fewer while it acts for a user)",
          xml: { wrapped: true },
        }),
        record_access: RecordAccess,
        user_id: Type.Union([Id, Type.Null()], {
          description: 'the user the token acts for (docs/access.md "Acting for a user"); null: none',
        }),
      },
      {
        ...closedObject('identity', 'Identity'),
        description:
          'Who the request is: its caller (or external subject), role, credential, the scopes it holds, its record access and the user it acts for',
      },
    );
    return { CallerSchema, CallerCreateSchema, CallerPatchSchema, CallerPageSchema, IdentitySchema };
  },
);
export type Caller = Static<ReturnType<typeof callerSchemas>['CallerSchema']>;
export type Identity = Static<ReturnType<typeof callerSchemas>['IdentitySchema']>;

export const CALLER_COLLECTION: CollectionSpec = {
  sortable: { id: 'integer', name: 'string', created_at: 'string' },
  filters: {
    role: {
      schema: Type.Union(Role.anyOf, { description: 'only callers with this role' }),
      column: 'role',
      operator: '=',
    },
    name: { schema: Type.String({ maxLength: 64, description: 'exact name' }), column: 'name', operator: '=' },
    ...CREATED_RANGE_FILTERS,
  },
};

const ApiKeyFields = {
  id: RecordFields.id,
  caller_id: Type.Integer({ ...Id, readOnly: true }),
  prefix: Type.String({
    readOnly: true,
    description: 'the public start of the key (rowi_xxxxxxxx), to tell keys apart',
  }),
  description: Type.String({ maxLength: 200, description: 'what the key is for' }),
  created_at: RecordFields.created_at,
  expires_at: Type.Union([Timestamp, Type.Null()], { description: 'when the key stops working; null: never' }),
  last_used_at: Type.Union([Timestamp, Type.Null()], {
    readOnly: true,
    description: 'last authenticated use, recorded to within a few seconds',
  }),
  revoked_at: Type.Union([Timestamp, Type.Null()], {
    readOnly: true,
    description: 'when the key was revoked; null while it works',
  }),
};

export const ApiKeySchema = Type.Object(ApiKeyFields, {
  additionalProperties: false,
  xml: { name: 'api_key' },
  title: 'ApiKey',
});

/** The answer to creating a key: the only time the key itself is shown. */
export const NewApiKeySchema = Type.Object(
  { ...ApiKeyFields, key: Type.String({ description: 'the API key; shown only in this response: store it now' }) },
  closedObject('api_key', 'NewApiKey'),
);

export const ApiKeyCreateSchema = Type.Object(
  {
    description: Type.Optional(
      freeText({ maxLength: 200, visible: false, description: 'what the key is for, up to 200 characters' }),
    ),
    expires_at: Type.Optional(
      Type.String({ ...Timestamp, description: 'when the key stops working (RFC 3339, in the future)' }),
    ),
  },
  closedObject('api_key', 'ApiKeyCreate'),
);

export const ApiKeyPageSchema = pageSchema(ApiKeySchema, 'api_keys');

export const API_KEY_COLLECTION: CollectionSpec = { sortable: { id: 'integer' }, filters: {} };

export const CallerParams = Type.Object({ id: Id });
export const ApiKeyParams = Type.Object({ id: Id, key_id: Id });
