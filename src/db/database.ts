import type { ColumnType, Generated, Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { Commits } from './commits.js';
import type { DatabaseOutage } from './outage.js';
import type { ReadCache } from './read-cache.js';
import type { EventTables } from './event-tables.js';
import type { OperationTables } from './operation-tables.js';

/**
 * Every table rowi stores, as Kysely sees it. Column names equal API field names (snake_case),
 * so there is no mapping layer. Timestamps are RFC 3339 UTC strings with milliseconds, written
 * by the application (never by the database), so that both backends store and compare them
 * identically.
 */
export interface Database extends EventTables, OperationTables {
  users: UsersTable;
  idempotency_keys: IdempotencyKeysTable;
  items: ItemsTable;
  stock: StockTable;
  stock_movements: StockMovementsTable;
  orders: OrdersTable;
  order_lines: OrderLinesTable;
  callers: CallersTable;
  api_keys: ApiKeysTable;
  signing_keys: SigningKeysTable;
  audit_events: AuditEventsTable;
  places: PlacesTable;
  observations: ObservationsTable;
}

/** The columns of a row that changes at a version: the version, and when it was made and last changed. */
export interface VersionedColumns {
  /** Incremented on every change; the ETag is derived from it. */
  version: number;
  created_at: string;
  updated_at: string;
}

/** The columns of a versioned record with an owner (engine/records.ts). */
export interface OwnedColumns extends VersionedColumns {
  /** The caller that created it (migration 0013); null when made before owners existed with no admin to assign it to. */
  created_by: ColumnType<number | null, number | null | undefined, never>;
}

export interface UsersTable extends OwnedColumns {
  id: Generated<number>;
  name: string;
  email: string;
  /** The email folded to lower case: the unique key that makes email case-insensitive. */
  email_key: string;
}
export type UserRow = Selectable<UsersTable>;
export type NewUserRow = Insertable<UsersTable>;

export interface IdempotencyKeysTable {
  /** Whose key this is: keys are per caller, so two callers may use the same key. */
  scope: string;
  key: string;
  /** Hash of method, target and body of the first request that used the key. */
  fingerprint: string;
  /** The first response, as JSON (status, body and the headers needed to replay it). */
  response: string;
  created_at: string;
  expires_at: ColumnType<string, string, never>;
}

/** The database or an open transaction: services that write take either. */
/** The database handle, with what follows its commits (commits.ts) and the state of its reachability (outage.ts). */
export type Db = Kysely<Database> & {
  readonly commits: Commits;
  readonly outage: DatabaseOutage;
  /** Records read by id kept in memory (SQLite; read-cache.ts). */
  readonly readCache?: ReadCache;
};
/**
 * A unit of work's transaction (unit-of-work.ts). `wroteEvents` is set by the outbox when the
 * transaction writes events; once it has committed, the unit of work tells `db.commits`.
 */
export type Trx = Transaction<Database> & { wroteEvents?: boolean };
export type Executor = Db | Trx;

/** Money is stored as integer minor units (cents); the API shows it as a decimal string. */
export interface ItemsTable extends OwnedColumns {
  id: Generated<number>;
  name: string;
  sku: string;
  price: number;
}
export type ItemRow = Selectable<ItemsTable>;

/** One row per item. quantity + reserved + fulfilled is everything ever put in. */
export interface StockTable {
  item_id: number;
  /** On hand and unreserved. */
  quantity: number;
  /** Held by placed orders. */
  reserved: number;
  /** Left inventory with fulfilled orders. */
  fulfilled: number;
  version: number;
  updated_at: string;
}
export type StockRow = Selectable<StockTable>;

export type MovementKind = 'set' | 'reserve' | 'release' | 'fulfil';

/** The stock ledger: every change of quantity or reserved, with the order that caused it. */
export interface StockMovementsTable {
  id: Generated<number>;
  item_id: number;
  kind: MovementKind;
  quantity_change: number;
  reserved_change: number;
  quantity_after: number;
  reserved_after: number;
  order_id: number | null;
  created_at: string;
}
export type StockMovementRow = Selectable<StockMovementsTable>;

export type OrderStatus = 'placed' | 'fulfilled' | 'cancelled';

export interface OrdersTable extends OwnedColumns {
  id: Generated<number>;
  name: string;
  /** Null once the user has been deleted (only possible when none of their orders is placed). */
  user_id: number | null;
  status: OrderStatus;
  total: number;
}
export type OrderRow = Selectable<OrdersTable>;

export interface OrderLinesTable {
  order_id: number;
  item_id: number;
  /** Where the line stands in the order as the caller wrote it (first appearance of the item). */
  position: number;
  quantity: number;
  /** The item's price when the line was first ordered. */
  unit_price: number;
}
export type OrderLineRow = Selectable<OrderLinesTable>;

export type Role = 'reader' | 'editor' | 'admin' | 'channel';

/** A system that uses the API (docs/security.md). Users are data; callers are who asks. */
export interface CallersTable extends VersionedColumns {
  id: Generated<number>;
  /** Also the OAuth client_id. */
  name: string;
  role: Role;
  /** Space-separated scopes granted beyond the role's, and taken away from it. */
  extra_scopes: string;
  removed_scopes: string;
  /** Space-separated resources it sees only its own records of (docs/access.md); empty: all it may read. */
  own_records: ColumnType<string, string | undefined, string>;
  /** Requests per minute; null: the role's default. */
  rate_limit: number | null;
}
export type CallerRow = Selectable<CallersTable>;

export interface ApiKeysTable {
  id: Generated<number>;
  caller_id: number;
  /** The public start of the key (`rowi_` and 8 characters), shown in listings and logs of key use. */
  prefix: string;
  /** SHA-256 of the whole key, base64url; the key itself is never stored. */
  secret_hash: string;
  description: string;
  created_at: string;
  expires_at: string | null;
  /** Kept to within a minute, written in batches rather than on every request. */
  last_used_at: string | null;
  revoked_at: string | null;
}
export type ApiKeyRow = Selectable<ApiKeysTable>;

/** Keys that sign the access tokens of POST /oauth/token; the newest unretired one signs. */
export interface SigningKeysTable {
  kid: string;
  algorithm: string;
  private_jwk: string;
  public_jwk: string;
  created_at: string;
  retired_at: string | null;
}
export type SigningKeyRow = Selectable<SigningKeysTable>;

/** One row per request, allowed or refused: who, what, which action, outcome, when, how long. */
export interface AuditEventsTable {
  id: Generated<number>;
  at: string;
  request_id: string;
  caller_id: number | null;
  caller_name: string | null;
  /** api_key, oauth (a token rowi issued) or external (a token of the configured issuer). */
  credential: string | null;
  /** The user the request acted for (the subject; the caller is the actor), migration 0016; null: none. */
  user_id: number | null;
  method: string;
  path: string;
  resource: string | null;
  record_id: string | null;
  action: string | null;
  status: number;
  duration_ms: number;
  client_ip: string | null;
}
export type AuditEventRow = Selectable<AuditEventsTable>;

/** What an observation measured (ranges in docs/guide.md "Weather"); null on a place before its first one. */
export interface Measurements {
  temperature_c: number;
  humidity_pct: number;
  wind_kph: number;
  /** One word of the vocabulary in upstream/conditions.ts. */
  conditions: string;
  observed_at: string;
  /** Who recorded it: the feed's name (the caller's, unless the feed named another). */
  source: string;
}

/** A place weather is known for, with a copy of its latest observation. */
export interface PlacesTable extends VersionedColumns {
  id: Generated<number>;
  /** The slug, lower-cased (places are matched case-insensitively). */
  place: string;
  name: string;
  latitude: number | null;
  longitude: number | null;
  temperature_c: number | null;
  humidity_pct: number | null;
  wind_kph: number | null;
  conditions: string | null;
  observed_at: string | null;
  source: string | null;
}
export type PlaceRow = Selectable<PlacesTable>;

/** Every recorded observation of a place: one per instant (a repeat corrects it). */
export interface ObservationsTable extends Measurements {
  id: Generated<number>;
  place_id: number;
  created_at: string;
  updated_at: string;
}
export type ObservationRow = Selectable<ObservationsTable>;
