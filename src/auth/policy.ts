import type { Role } from '../db/database.js';
import { declareOwnedTable, userColumnOf } from '../db/visibility.js';

/**
 * Who may do what (docs/security.md), as pure data and functions: scopes are `<resource>:<action>`;
 * roles are sets of scopes; a caller's grants add to or take from its role.
 */
export const ACTIONS = ['read', 'create', 'update', 'delete'] as const;
export type Action = (typeof ACTIONS)[number];

/** What a data resource's declaration says of who sees and creates its records. */
export interface DataResourceRule {
  /** Whether its records have an owner, the caller that created them (record access: all or own). */
  owned: boolean;
  /** Whether a request acting for a user may create its records (docs/access.md "Acting for a user"). */
  actingMayCreate: boolean;
}

/**
 * The data resources other systems read and change, by name: the built-in ones, then any declared
 * before the app is built (declareDataResource), in the order declared.
 */
const DATA_RULES = new Map<string, DataResourceRule>([
  ['users', { owned: true, actingMayCreate: false }],
  ['items', { owned: true, actingMayCreate: false }],
  ['stock', { owned: false, actingMayCreate: true }],
  ['orders', { owned: true, actingMayCreate: true }],
  ['weather', { owned: false, actingMayCreate: true }],
]);

/** The data resources other systems read and change. */
export const DATA_RESOURCES: readonly string[] = [];

export const ROLES = ['reader', 'editor', 'admin', 'channel'] as const satisfies readonly Role[];

/**
 * The resources whose records have an owner, the caller that created them (docs/access.md): per
 * resource a caller sees all records or only its own, whatever the action.
 */
export const OWNED_RESOURCES: readonly string[] = [];
export type OwnedResource = string;
export type RecordAccess = Record<OwnedResource, 'all' | 'own'>;

/**
 * The resources a role sees only its own records of, unless a caller's record access says
 * otherwise: a sales channel sees the orders it placed and the users (its customers) it created.
 */
export const ROLE_OWN_RECORDS: Record<Role, readonly OwnedResource[]> = {
  reader: [],
  editor: [],
  admin: [],
  channel: ['users', 'orders'],
};

export function isOwnedResource(text: string): text is OwnedResource {
  return DATA_RULES.get(text)?.owned === true;
}

/** Whether a request acting for a user may create records of `resource` (any resource but a data resource that says not). */
export function actingMayCreate(resource: string): boolean {
  return DATA_RULES.get(resource)?.actingMayCreate !== false;
}

/**
 * Whether acting for a user narrows `resource` to that user's records: an owned resource whose
 * table names a record's user by a column (db/visibility.ts; users by id, orders by user_id).
 */
export function actingNarrows(resource: string): boolean {
  return isOwnedResource(resource) && userColumnOf(resource) !== undefined;
}

/** The stored form (space-separated resources seen own-only) as the representation's map. */
export function recordAccessOf(ownRecords: ReadonlySet<string>): RecordAccess {
  return Object.fromEntries(
    OWNED_RESOURCES.map((resource) => [resource, ownRecords.has(resource) ? 'own' : 'all']),
  ) as RecordAccess;
}

/**
 * The scope that lets a caller act for one of its users (docs/access.md "Acting for a user"): ask
 * POST /oauth/token for a token with `user_id`, which then sees only that user's record and orders.
 */
export const ACT_FOR_USERS = 'users:act';

/**
 * The scope that lets a caller cancel the orders it sees (POST /v1/orders/{id}/cancel) without
 * changing them otherwise: a sales channel cancels its own orders, but neither fulfils nor edits
 * them (docs/access.md). Who may update orders may cancel them by PATCH as well.
 */
export const CANCEL_ORDERS = 'orders:cancel';

export type Scope = `${string}:${Action}` | typeof ACT_FOR_USERS | typeof CANCEL_ORDERS;

/**
 * What a route declares it needs: a scope; 'authenticated', any valid credential whatever scopes
 * it holds (an answer about that credential itself: GET /v1/callers/me, as OAuth token
 * introspection answers any valid token); or 'public', no credentials at all.
 */
export type DeclaredPermission = Scope | 'authenticated' | 'public';

declare module '../http/schemas.js' {
  /** A route declares one of these scopes as its permission (or 'authenticated', or 'public'). */
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- the scopes, merged into the engine's interface
  interface RoutePermissions extends Record<Scope, true> {}
}

/** Caller management: only the admin role has these, and they cannot be granted to another role. */
export const MANAGEMENT_SCOPES: readonly Scope[] = ACTIONS.map((action): Scope => `callers:${action}`);

/**
 * What a caller needs to manage callers: the admin role (the only one with caller management),
 * still holding read and update of callers. With those two it can give any scope back, to itself
 * or to another admin, so they are what must never be lost by every caller at once.
 */
export const CALLER_MANAGEMENT_CORE: readonly Scope[] = ['callers:read', 'callers:update'];

export function canManageCallers(role: Role, removed: readonly string[]): boolean {
  return role === 'admin' && !CALLER_MANAGEMENT_CORE.some((scope) => removed.includes(scope));
}

/**
 * Reading and cancelling long-running operations (imports, docs/bulk.md "Imports"): every role has
 * them, as every caller may follow the operations it started; which operations it sees is
 * decided by seesAllOperations.
 */
export const OPERATION_SCOPES: readonly Scope[] = ['operations:read', 'operations:update'];

/**
 * A caller sees every operation when it manages callers (an admin); any other sees only those it
 * started. The same test decides who gets operation events (readableResources).
 */
export function seesAllOperations(scopes: ReadonlySet<string>): boolean {
  return scopes.has('callers:read');
}

/**
 * Backups of the SQLite file (docs/backups.md): listing them and starting
 * one. Only the admin role has them; they can be granted to another caller (a monitoring system
 * that reads the list, say).
 */
export const BACKUP_SCOPES: readonly Scope[] = ['backups:read', 'backups:create'];

/** The scopes of the built-in data resources. */
const BUILT_IN_DATA_SCOPES: readonly Scope[] = [...DATA_RULES.keys()].flatMap((resource) =>
  ACTIONS.map((action): Scope => `${resource}:${action}`),
);

/** The scopes of every other built-in resource. */
const OTHER_SCOPES: readonly Scope[] = [
  CANCEL_ORDERS,
  ACT_FOR_USERS,
  ...MANAGEMENT_SCOPES,
  'audit-events:read',
  'events:read',
  ...ACTIONS.map((action): Scope => `webhook-endpoints:${action}`),
  'metrics:read',
  ...OPERATION_SCOPES,
  ...BACKUP_SCOPES,
];

/** Every scope there is, in a stable order: the built-in ones, then those of declared data resources. */
export const ALL_SCOPES: readonly Scope[] = [];

/**
 * What a request acting for one user may do (docs/access.md "Acting for a user"): the data
 * resources, cancelling orders, the events and its own operations; never what concerns the whole
 * deployment (callers, the audit trail, metrics, backups, webhook endpoints), which would show it
 * more than that user's records, whatever its caller holds.
 */
export function mayUseWhileActing(scope: string): boolean {
  const split = scope.lastIndexOf(':');
  return (
    (DATA_RULES.has(scope.slice(0, split)) && (ACTIONS as readonly string[]).includes(scope.slice(split + 1))) ||
    scope === CANCEL_ORDERS ||
    scope === 'events:read' ||
    (OPERATION_SCOPES as readonly string[]).includes(scope)
  );
}

/**
 * The resources an event can be of, each seen with its own read scope: a caller reads an event
 * only when it may read the resource the event is about.
 */
export const EVENT_RESOURCES: readonly string[] = [];

/**
 * What decides which events a caller sees: its scopes, the resources it sees only its own records
 * of, and who it is (the caller, and the user a token acts for), whose records those are.
 */
export interface Reach {
  scopes: ReadonlySet<string>;
  ownRecords: ReadonlySet<string>;
  callerId: number | null;
  userId: number | null;
}

/**
 * The resources whose events a caller may see, all or some of them (auth/visibility.ts
 * eventSightOf says which): those it may read, except stock while it sees only some orders or
 * items (its own, or its user's): a stock event names the order that moved it and the item, whose
 * owners it does not carry.
 */
export function readableResources(reach: Reach): string[] {
  const someOrdersOrItems = reach.userId !== null || reach.ownRecords.has('orders') || reach.ownRecords.has('items');
  return EVENT_RESOURCES.filter(
    (resource) =>
      reach.scopes.has(`${resource}:read`) &&
      !(resource === 'stock' && someOrdersOrItems) &&
      // An operation event does not say whose operation it is told of: only those who see every
      // operation get them, and never a request acting for a user (which sees only its user's).
      !(resource === 'operations' && (!seesAllOperations(reach.scopes) || reach.userId !== null)),
  );
}

/** The credentials an operation accepts, as OpenAPI security schemes (docs/security.md), with the scopes there are now. */
export function securitySchemes() {
  return {
    apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'an API key of the caller (rowi_…)' },
    oauth2: {
      type: 'oauth2',
      description:
        "client credentials: the caller's name as client id, one of its API keys as secret; the access token is a short-lived JWT (ROWI_TOKEN_LIFETIME) checked as RFC8725 advises (one pinned algorithm, issuer, audience and expiry)",
      flows: {
        clientCredentials: {
          tokenUrl: '/oauth/token',
          scopes: Object.fromEntries(
            ALL_SCOPES.map((scope) => [scope, `${scope.split(':')[1]} ${scope.split(':')[0]}`]),
          ),
        },
      },
    },
    bearer: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description:
        'a JWT of the configured external issuer, checked as RFC8725 advises (the algorithms of ROWI_JWT_ALGORITHMS only, issuer, audience and expiry)',
    },
  } as const;
}

/**
 * The OpenAPI security requirement of a permission: any one of the three credentials; a token
 * with any scopes (none listed) where no scope is needed.
 */
export function securityOf(permission: DeclaredPermission) {
  if (permission === 'public') return [];
  return [{ apiKey: [] }, { oauth2: permission === 'authenticated' ? [] : [permission] }, { bearer: [] }];
}

const dataScopes = (resources: readonly string[], ...actions: Action[]): Scope[] =>
  resources.flatMap((resource) => actions.map((action): Scope => `${resource}:${action}`));

const BUILT_IN_DATA = [...DATA_RULES.keys()];

/**
 * The scopes of each role. Reader and editor hold data scopes, filled in by refreshCatalogue:
 * those of a declared data resource come after everything a built-in role holds.
 */
export const ROLE_SCOPES: Record<Role, readonly Scope[]> = {
  reader: [],
  editor: [],
  admin: ALL_SCOPES,
  // A sales channel places orders for its customers and cancels them, reads the catalogue, and
  // follows its own records' events (docs/access.md): it sees only its own users and orders.
  channel: [
    'orders:read',
    'orders:create',
    CANCEL_ORDERS,
    'users:read',
    'users:create',
    'items:read',
    'stock:read',
    'events:read',
    ...OPERATION_SCOPES,
  ],
};

const KNOWN = new Set<string>();

/** Fills the lists above from the data resources there are now (at load, and at each declaration or its undoing). */
function refreshCatalogue(): void {
  const resources = [...DATA_RULES.keys()];
  const declared = resources.filter((resource) => !BUILT_IN_DATA.includes(resource));
  const owned = resources.filter((resource) => DATA_RULES.get(resource)!.owned);
  replaceAll(DATA_RESOURCES, resources);
  replaceAll(OWNED_RESOURCES, owned);
  replaceAll(EVENT_RESOURCES, [...BUILT_IN_DATA, 'callers', 'webhook-endpoints', 'operations', ...declared]);
  replaceAll(ALL_SCOPES, [...BUILT_IN_DATA_SCOPES, ...OTHER_SCOPES, ...dataScopes(declared, ...ACTIONS)]);
  ROLE_SCOPES.reader = [
    ...dataScopes(BUILT_IN_DATA, 'read'),
    'events:read',
    ...OPERATION_SCOPES,
    ...dataScopes(declared, 'read'),
  ];
  ROLE_SCOPES.editor = [
    ...dataScopes(BUILT_IN_DATA, 'read', 'create', 'update'),
    CANCEL_ORDERS,
    'events:read',
    ...OPERATION_SCOPES,
    ...dataScopes(declared, 'read', 'create', 'update'),
  ];
  KNOWN.clear();
  for (const scope of ALL_SCOPES) KNOWN.add(scope);
}

/** Replaces what a catalogue list holds, in place: its importers hold the list itself. */
function replaceAll<T>(list: readonly T[], items: readonly T[]): void {
  (list as T[]).splice(0, list.length, ...items);
}

/** A declared data resource's rule, and the column naming its records' user when acting narrows them. */
export interface DataResourceDeclaration extends DataResourceRule {
  userColumn?: string;
}

/**
 * Declares a data resource (notes): its scopes `name:read|create|update|delete`, in the reader,
 * editor and admin roles as the other data resources' are, after the built-in ones; its record
 * access (all or own) when owned, whose table is then owned (db/visibility.ts declareOwnedTable,
 * the table named as the resource); whether acting for a user may create it, and the column by
 * which acting narrows it (an owned resource only). Call it before the app is built, whose schemas and OpenAPI document
 * then list it. Returns what undoes it.
 */
export function declareDataResource(name: string, rule: DataResourceDeclaration): () => void {
  if (DATA_RULES.has(name) || KNOWN.has(`${name}:read`)) throw new Error(`The resource ${name} is declared already`);
  const undoTable = rule.owned
    ? declareOwnedTable(name, rule.userColumn === undefined ? {} : { userColumn: rule.userColumn })
    : undefined;
  DATA_RULES.set(name, { owned: rule.owned, actingMayCreate: rule.actingMayCreate });
  refreshCatalogue();
  return () => {
    DATA_RULES.delete(name);
    undoTable?.();
    refreshCatalogue();
  };
}

refreshCatalogue();

export function isScope(text: string): text is Scope {
  return KNOWN.has(text);
}

/** May this scope be added to a caller's role by a grant? Everything but caller management. */
export function isGrantable(scope: Scope): boolean {
  return !MANAGEMENT_SCOPES.includes(scope);
}

/** The scopes a caller holds: its role's, plus its extra grants, minus its removed ones. */
export function scopesOf(role: Role, extra: readonly string[], removed: readonly string[]): ReadonlySet<string> {
  const scopes = new Set<string>(ROLE_SCOPES[role]);
  for (const scope of extra) if (isScope(scope) && isGrantable(scope)) scopes.add(scope);
  for (const scope of removed) scopes.delete(scope);
  return scopes;
}

/** A caller's grants as stored: its role, its extra and removed scopes and the resources it sees only its own records of (space-separated). */
export interface StoredGrants {
  role: Role;
  extra_scopes: string;
  removed_scopes: string;
  own_records: string;
}

/** The scopes a caller holds, from its grants as stored. */
export function scopesOfGrants(grants: Omit<StoredGrants, 'own_records'>): ReadonlySet<string> {
  return scopesOf(grants.role, parseScopeList(grants.extra_scopes), parseScopeList(grants.removed_scopes));
}

/** What caller `callerId` may see, from its grants as stored (it acts for no user). */
export function reachOfGrants(grants: StoredGrants, callerId: number | null): Reach {
  return { scopes: scopesOfGrants(grants), ownRecords: ownRecordsOf(grants.own_records), callerId, userId: null };
}

/** The stored list of resources seen own-only, as a set (unknown names are ignored). */
export function ownRecordsOf(stored: string): ReadonlySet<string> {
  return new Set(parseScopeList(stored).filter(isOwnedResource));
}

/** Space-separated scope lists, the form of OAuth's `scope` (RFC 6749 §3.3) and of the store. */
export function parseScopeList(text: string | undefined): string[] {
  return text === undefined ? [] : text.split(' ').filter((scope) => scope !== '');
}

export interface Permission {
  /**
   * The scope the operation needs; authenticated for those any valid credential may call, public
   * for the few anyone may call.
   */
  scope: DeclaredPermission;
  /**
   * Scopes that must be held as well. A route that addresses one record (`/v1/orders/:id…`)
   * also needs read on that collection, so a caller who may not read orders cannot learn from
   * 404-versus-other which order ids exist (docs/security.md); and read on a part of the record
   * that has scopes of its own (`/v1/items/:id/stock` needs stock:read too), whose answers show it.
   */
  also: readonly Scope[];
  /**
   * The scope's two halves, as the audit trail records them; null for a public route. A route
   * any credential may call has no scope: its resource is the collection its URL names
   * (`/v1/callers/me`: callers), its action that of its method (null here).
   */
  resource: string | null;
  action: Action | null;
}

/** The permission of a route, from its declared scope and its URL. */
export function permissionOf(scope: DeclaredPermission, url: string): Permission {
  if (scope === 'public') return { scope, also: [], resource: null, action: null };
  if (scope === 'authenticated')
    return { scope, also: [], resource: /^\/v1\/([a-z-]+)/.exec(url)?.[1] ?? null, action: null };
  // A batch (`/v1/users/batch`, `/v1/items/stock/batch`) addresses records by id in its entries, so it needs the same reads;
  // so does the stock of many items (`/v1/items/stock?id=`), which answers item ids.
  const addressed = /^\/v1\/[a-z-]+\/(:|([a-z-]+\/)?batch$|stock$)/.test(url)
    ? url.split('/').filter((segment) => /^[a-z-]+$/.test(segment))
    : [];
  const reads = addressed.map((segment): Scope => `${segment}:read`).filter((read) => read !== scope && isScope(read));
  const split = scope.lastIndexOf(':');
  const action = scope.slice(split + 1);
  return {
    scope,
    also: reads,
    resource: scope.slice(0, split),
    // A scope beyond the four actions (orders:cancel) changes a record: the audit trail records an update.
    action: (ACTIONS as readonly string[]).includes(action) ? (action as Action) : 'update',
  };
}

const NONE: readonly Scope[] = Object.freeze([]);

/** The scopes of `permission` that `held` lacks (empty when the call may proceed). */
export function missingScopes(held: ReadonlySet<string>, permission: Permission): readonly Scope[] {
  if (permission.scope === 'public') return NONE;
  // Any credential may call an authenticated route: only scopes it names besides (none so far) are needed.
  const own = permission.scope === 'authenticated' ? undefined : permission.scope;
  // Every authorised request comes here: answer it without allocating.
  if ((own === undefined || held.has(own)) && permission.also.every((scope) => held.has(scope))) return NONE;
  const missing: Scope[] = [];
  if (own !== undefined && !held.has(own)) missing.push(own);
  for (const scope of permission.also) if (!held.has(scope)) missing.push(scope);
  return missing;
}
