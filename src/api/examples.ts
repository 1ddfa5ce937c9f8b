/**
 * An example of each named schema of the OpenAPI document (docs page, generated clients), taken
 * from real answers of rowi and given fixed times. A page's example is its record's, on a page of
 * one (openapi-components.ts). test/http/openapi-examples.test.ts validates each against its schema.
 */
const AT = '2026-06-01T12:00:00.000Z';
const LATER = '2026-06-01T12:05:00.000Z';

const user = { id: 1, name: 'Ada Lovelace', email: 'ada@example.com', created_by: 2, created_at: AT, updated_at: AT };
const item = { id: 1, name: 'Widget', sku: 'WID-1', price: '2.50', created_by: 1, created_at: AT, updated_at: AT };
const line = { item_id: 1, quantity: 2, unit_price: '2.50', line_total: '5.00' };
const order = {
  id: 1,
  name: 'SO-1001',
  user_id: 1,
  status: 'placed',
  lines: [line],
  total: '5.00',
  created_by: 2,
  created_at: AT,
  updated_at: AT,
};
const expandedItem = { ...item, stock: { item_id: 1, quantity: 98, reserved: 2, updated_at: AT } };
const expandedLine = { ...line, item: expandedItem };
const expandedOrder = {
  ...order,
  user,
  lines: [expandedLine],
};
const movement = {
  id: 2,
  item_id: 1,
  kind: 'reserve',
  quantity_change: -2,
  reserved_change: 2,
  quantity_after: 98,
  reserved_after: 2,
  order_id: 1,
  created_at: AT,
};
/** What Tokyo's example observation measured: the recorded observation, and the place's latest weather. */
const measurements = {
  temperature_c: 12.5,
  humidity_pct: 60,
  wind_kph: 8,
  conditions: 'partly-cloudy',
  observed_at: '2026-06-01T09:00:00.000Z',
  source: 'weather-feed',
};
const observation = { id: 1, place: 'tokyo', ...measurements, created_at: AT, updated_at: AT };
const editorScopes = ['users', 'items', 'stock', 'orders', 'weather'].flatMap((resource) =>
  ['read', 'create', 'update'].map((action) => `${resource}:${action}`),
);
const caller = {
  id: 2,
  name: 'sales-system',
  role: 'editor',
  extra_scopes: [],
  removed_scopes: [],
  scopes: [...editorScopes, 'events:read'],
  record_access: { users: 'all', items: 'all', orders: 'all' },
  rate_limit: null,
  created_at: AT,
  updated_at: AT,
};
const apiKey = {
  id: 2,
  caller_id: 2,
  prefix: 'rowi_geej5b4a',
  description: 'sales system, production',
  created_at: AT,
  expires_at: null,
  last_used_at: LATER,
  revoked_at: null,
};
const endpoint = {
  id: 1,
  url: 'https://hooks.example.com/rowi',
  owner_caller_id: 1,
  description: 'order desk',
  events: ['order.created', 'order.status_changed'],
  enabled: true,
  disabled_reason: null,
  failed_attempts: 0,
  previous_secret_expires_at: null,
  created_at: AT,
  updated_at: AT,
};
const attempt = { attempted_at: LATER, status_code: 204, duration_ms: 38, error: null };

const backup = {
  file: 'rowi-20261126T203000.123Z.sqlite',
  bytes: 1_048_576,
  sha256: '9f2c1e0d4b7a8c6e5f3d2b1a0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d',
  taken_at: AT,
  ms: 412,
  schema: '0017-one-backup-at-a-time',
  rows: { users: 1200, items: 340, orders: 5600 },
  rowi: '0.1.0',
  url: '/v1/backups/rowi-20261126T203000.123Z.sqlite',
};

const importOperation = {
  id: 1,
  kind: 'import',
  target: 'items',
  status: 'succeeded',
  media_type: 'text/csv',
  options: { mode: 'partial', on_conflict: 'update', dry_run: false },
  progress: {
    bytes_read: 1048576,
    bytes_total: 1048576,
    rows_read: 40000,
    rows_succeeded: 39998,
    rows_skipped: 0,
    rows_failed: 2,
    committed_through: 40001,
  },
  created_by: 2,
  caller_name: 'warehouse',
  created_at: AT,
  updated_at: LATER,
  started_at: AT,
  finished_at: LATER,
  summary: {
    detail: '39998 rows stored, 0 skipped, 2 refused.',
    rows_committed: 39998,
    committed:
      "The file's rows 2 to 40001 were committed (row 1 is its header), except the failed rows listed in errors; no later row was.",
  },
  errors: [
    { row: 17, field: 'price', problem: 'validation-failed', detail: 'price must be a decimal string' },
    { row: 902, field: 'sku', problem: 'duplicate-in-file', detail: 'has the same sku as row 12 of this file' },
  ],
  errors_url: '/v1/operations/1/errors',
};

const event = {
  id: 'evt_01a214fb578f000000b9bd50f327',
  type: 'order.created',
  created_at: AT,
  path: '/v1/orders/1',
  data: order,
};
const orderCreatedType = {
  type: 'order.created',
  resource: 'orders',
  description: 'An order was placed, reserving its stock; data is the order.',
  example: event,
};

export const API_EXAMPLES: Record<string, unknown> = {
  Index: {
    name: 'rowi',
    version: '0.1.0',
    links: {
      self: '/v1',
      openapi: '/v1/openapi.json',
      users: '/v1/users',
      items: '/v1/items',
      orders: '/v1/orders',
      weather: '/v1/weather',
      limits: '/v1/limits',
    },
  },
  Health: {
    status: 'pass',
    version: '0.1.0',
    checks: { database: { status: 'pass', duration_ms: 0.64 }, migrations: { status: 'pass', duration_ms: 3.65 } },
  },
  Limits: {
    rate_limit: { policy: 'caller', quota: 1200, window_seconds: 60 },
    orders_create: { policy: 'orders-create', quota: 300, window_seconds: 60 },
    failed_authentication: { policy: 'failed-auth', quota: 10, window_seconds: 60 },
    counted: 'instance',
    body_limit_bytes: 1048576,
    page_size_max: 500,
    imports: { file_bytes_max: 1073741824, running_max: 1, queued_max: 10, queued_bytes_max: 2147483648 },
    timeouts_ms: { headers: 10000, request: 30000, keep_alive: 72000, handler: 15000, database: 5000 },
  },
  ProblemType: {
    type: '/problems/email-taken',
    status: 409,
    title: 'Email already in use',
    description: 'Another user has this email address; emails are compared without regard to case.',
  },
  Problem: {
    type: '/problems/validation-failed',
    title: 'Validation failed',
    status: 422,
    detail: 'The body has 2 invalid fields.',
    instance: '/v1/users',
    request_id: '0b6f3a54-5d0e-4a55-a0a7-4a1b1cfb5a0e',
    errors: [
      { in: 'body', pointer: '#/name', detail: 'must not be empty' },
      { in: 'body', pointer: '#/email', detail: 'must be an email address' },
    ],
  },
  User: user,
  UserCreate: { name: 'Ada Lovelace', email: 'ada@example.com' },
  UserReplace: { name: 'Ada King', email: 'ada@example.com' },
  UserPatch: { name: 'Ada King' },
  Item: item,
  ItemCreate: { name: 'Widget', sku: 'WID-1', price: '2.50' },
  ItemReplace: { name: 'Widget', sku: 'WID-1', price: '2.75' },
  ItemPatch: { price: '2.75' },
  Stock: { item_id: 1, quantity: 98, reserved: 2, updated_at: AT },
  StockReplace: { quantity: 100 },
  StockPatch: { quantity: 120 },
  Order: order,
  OrderLine: line,
  // As expand=user,lines.item.stock answers (docs/reading.md "Related records in one call").
  ExpandedOrder: expandedOrder,
  ExpandedOrderLine: expandedLine,
  ExpandedItem: expandedItem,
  ExpandedStockMovement: { ...movement, order: expandedOrder },
  // A page of the ledger as read without expand (its records are ExpandedStockMovement, whose order is optional).
  StockMovementPage: { data: [movement], next_cursor: null },
  OrderLineInput: { item_id: 1, quantity: 2 },
  OrderCreate: { name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 2 }] },
  OrderReplace: { name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 3 }] },
  OrderPatch: { status: 'fulfilled' },
  UserBatch: {
    create: [{ name: 'Grace Hopper', email: 'grace@example.com' }],
    change: [{ id: 1, if_match: '"v1"', name: 'Ada King' }],
  },
  UserBatchReplace: { id: 1, if_match: '"v1"', name: 'Ada King', email: 'ada@example.com' },
  UserBatchChange: { id: 1, name: 'Ada King' },
  UserBatchDelete: { id: 2, if_match: '"v3"' },
  UserBatchResult: {
    create: [
      {
        status: 201,
        location: '/v1/users/2',
        etag: '"v1"',
        record: { ...user, id: 2, name: 'Grace Hopper', email: 'grace@example.com' },
      },
    ],
    change: [{ status: 200, location: '/v1/users/1', etag: '"v2"', record: { ...user, name: 'Ada King' } }],
  },
  ItemBatch: { create: [{ name: 'Widget', sku: 'WID-1', price: '2.50' }], delete: [{ id: 7 }] },
  ItemBatchReplace: { id: 1, name: 'Widget', sku: 'WID-1', price: '2.75' },
  ItemBatchChange: { id: 1, if_match: '"v1"', price: '2.75' },
  ItemBatchDelete: { id: 7 },
  ItemBatchResult: {
    create: [{ status: 201, location: '/v1/items/1', etag: '"v1"', record: item }],
    delete: [{ status: 204, location: '/v1/items/7' }],
  },
  StockBatch: { set: [{ item_id: 1, quantity: 100 }], adjust: [{ item_id: 2, by: -3 }] },
  StockBatchSet: { item_id: 1, quantity: 100, if_match: '"v4"' },
  StockBatchAdjust: { item_id: 2, by: -3 },
  StockBatchResult: {
    set: [
      {
        status: 200,
        location: '/v1/items/1/stock',
        etag: '"v5"',
        record: { item_id: 1, quantity: 100, reserved: 2, updated_at: AT },
      },
    ],
    adjust: [
      {
        status: 200,
        location: '/v1/items/2/stock',
        etag: '"v3"',
        record: { item_id: 2, quantity: 17, reserved: 0, updated_at: AT },
      },
    ],
  },
  Backup: backup,
  BackupOperation: {
    id: 7,
    kind: 'backup',
    status: 'succeeded',
    created_by: 1,
    caller_name: 'admin',
    created_at: AT,
    updated_at: LATER,
    started_at: AT,
    finished_at: LATER,
    summary: { detail: `Backup taken and checked: ${backup.file} in ROWI_BACKUP_DIR.`, backup, problem: null },
  },
  ImportOperation: importOperation,
  Operation: importOperation,
  OperationRowError: {
    row: 17,
    field: 'price',
    problem: 'validation-failed',
    detail: 'price must be a decimal string',
  },
  OperationRowErrors: {
    data: [
      { row: 17, field: 'price', problem: 'validation-failed', detail: 'price must be a decimal string' },
      { row: 42, field: 'sku', problem: 'sku-taken', detail: 'another item already has the SKU MUG-1' },
    ],
  },
  OrderBatch: {
    create: [
      { name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 2 }] },
      { name: 'SO-1002', user_id: 1, lines: [{ item_id: 1, quantity: 1 }] },
    ],
  },
  OrderBatchReplace: { id: 1, name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 3 }] },
  OrderBatchChange: { id: 1, if_match: '"v1"', status: 'fulfilled' },
  OrderBatchDelete: { id: 1 },
  OrderBatchResult: {
    create: [
      { status: 201, location: '/v1/orders/1', etag: '"v1"', record: order },
      {
        status: 201,
        location: '/v1/orders/2',
        etag: '"v1"',
        record: {
          ...order,
          id: 2,
          name: 'SO-1002',
          lines: [{ ...line, quantity: 1, line_total: '2.50' }],
          total: '2.50',
        },
      },
    ],
  },
  Weather: {
    id: 1,
    place: 'tokyo',
    name: 'Tokyo',
    latitude: 35.68,
    longitude: 139.69,
    ...measurements,
    stale: false,
    created_at: AT,
    updated_at: AT,
  },
  Observation: observation,
  ObservationInput: {
    name: 'Tokyo',
    temperature_c: 12.5,
    humidity_pct: 60,
    wind_kph: 8,
    conditions: 'partly-cloudy',
    observed_at: '2026-06-01T18:00:00+09:00',
  },
  PlacePatch: { latitude: 35.68, longitude: 139.69 },
  Caller: caller,
  RecordAccess: caller.record_access,
  RecordAccessChange: { orders: 'own' },
  CallerCreate: { name: 'sales-system', role: 'editor' },
  CallerPatch: { rate_limit: 600 },
  Scope: 'orders:create',
  // A sales channel's token acting for its customer 12 (docs/access.md "Acting for a user").
  Identity: {
    caller_id: 3,
    name: 'web-shop',
    role: 'channel',
    credential: 'oauth',
    scopes: ['items:read', 'orders:cancel', 'orders:create', 'orders:read', 'users:read'],
    record_access: { users: 'own', items: 'all', orders: 'own' },
    user_id: 12,
  },
  ApiKey: apiKey,
  ApiKeyCreate: { description: 'sales system, production', expires_at: '2027-06-01T00:00:00Z' },
  NewApiKey: { ...apiKey, last_used_at: null, key: 'rowi_geej5b4a_xJQRB8HDy7_cZ_kpLwHaoqUX6OywiXDi773aFBy09uI' },
  AuditEvent: {
    id: 7,
    at: AT,
    request_id: 'c0f8f90c-718e-448b-b37d-2242b1b0ee3f',
    caller_id: 2,
    caller_name: 'sales-system',
    credential: 'api_key',
    user_id: null,
    method: 'POST',
    path: '/v1/orders',
    resource: 'orders',
    record_id: '1',
    action: 'create',
    status: 201,
    duration_ms: 4.2,
    client_ip: '192.0.2.10',
  },
  Event: event,
  WebhookEndpoint: endpoint,
  SubscribedEventType: 'order.created',
  WebhookEndpointCreate: {
    url: 'https://hooks.example.com/rowi',
    events: ['order.created', 'order.status_changed'],
    description: 'order desk',
  },
  WebhookEndpointPatch: { enabled: false },
  WebhookEndpointWithSecret: { ...endpoint, secret: 'whsec_EAT3UyjG4d5HoN9SqsBCe1qnYGVDaYe4/g+mRCu5Usk=' },
  WebhookAttempt: attempt,
  WebhookDelivery: {
    id: 1,
    endpoint_id: 1,
    event_id: 'evt_01a214fb578f000000b9bd50f327',
    event_type: 'order.created',
    resource: '/v1/orders/42',
    sequence: 1,
    status: 'succeeded',
    next_attempt_at: null,
    attempts: [attempt],
    created_at: AT,
    updated_at: LATER,
  },
  WebhookEndpointHealth: {
    endpoint_id: 1,
    window_start: '2026-05-31T12:05:00.000Z',
    deliveries: { pending: 3, succeeded: 120, dead: 1 },
    attempts: { total: 130, succeeded: 120, failed: 10 },
    success_rate: 0.923,
    lag_ms: 5400,
    last_success_at: LATER,
    last_failure: { at: '2026-06-01T12:04:10.000Z', delivery_id: 9, status_code: 500, error: 'answered 500' },
  },
  EventTypeDescription: orderCreatedType,
  EventTypeCatalogue: { data: [orderCreatedType] },
  TokenRequest: {
    grant_type: 'client_credentials',
    client_id: 'sales-system',
    client_secret: 'rowi_geej5b4a_xJQRB8HDy7_cZ_kpLwHaoqUX6OywiXDi773aFBy09uI',
  },
  Token: {
    access_token: 'eyJhbGciOiJFUzI1NiIsImtpZCI6IjRlNTlhNmNlIn0.eyJzdWIiOiJzYWxlcy1zeXN0ZW0ifQ.c2lnbmF0dXJl',
    token_type: 'Bearer',
    expires_in: 900,
    scope: 'orders:read orders:create',
  },
  OAuthError: { error: 'invalid_client', error_description: 'The client id and secret do not match.' },
  JWKS: {
    keys: [
      {
        kid: '4e59a6ce-969d-4b43-aa41-d6e67c3c7cb8',
        kty: 'EC',
        alg: 'ES256',
        use: 'sig',
        crv: 'P-256',
        x: 'v_7iIcN7S4RR0Qo5WnyMc20k2YoFcWQrhVMDKbubjEs',
        y: 'j8iZlKcPVViXx67mIYv0wkoCUWU_WDc4mSYBrPPzf2I',
      },
    ],
  },
  AuthorizationServerMetadata: {
    issuer: 'https://api.example.com',
    token_endpoint: 'https://api.example.com/oauth/token',
    jwks_uri: 'https://api.example.com/.well-known/jwks.json',
    grant_types_supported: ['client_credentials'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    scopes_supported: ['users:read', 'orders:read', 'orders:create'],
    response_types_supported: [],
  },
};
