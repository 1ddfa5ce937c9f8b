/**
 * An example of each named schema of the OpenAPI document (docs page, generated clients), taken
 * from real answers of rowi and given fixed times. A page's example is its record's, on a page of
 * one (openapi-components.ts). test/http/openapi-examples.test.ts validates each against its schema.
 */
const AT = '2026-06-01T12:00:00.000Z';
const LATER = '2026-06-01T12:05:00.000Z';

const user = { id: 1, name: 'Ada Lovelace', email: 'ada@example.com', created_at: AT, updated_at: AT };
const item = { id: 1, name: 'Widget', sku: 'WID-1', price: '2.50', created_at: AT, updated_at: AT };
const line = { item_id: 1, quantity: 2, unit_price: '2.50', line_total: '5.00' };
const order = { id: 1, name: 'SO-1001', user_id: 1, status: 'placed', lines: [line], total: '5.00', created_at: AT, updated_at: AT };
const movement = { id: 2, item_id: 1, kind: 'reserve', quantity_change: -2, reserved_change: 2, quantity_after: 98, reserved_after: 2, order_id: 1, created_at: AT };
const observation = { id: 1, place: 'tokyo', temperature_c: 12.5, humidity_pct: 60, wind_kph: 8, conditions: 'partly-cloudy', observed_at: '2026-06-01T09:00:00.000Z', source: 'weather-feed', created_at: AT, updated_at: AT };
const editorScopes = ['users', 'items', 'stock', 'orders', 'weather'].flatMap((resource) => ['read', 'create', 'update'].map((action) => `${resource}:${action}`));
const caller = { id: 2, name: 'sales-system', role: 'editor', extra_scopes: [], removed_scopes: [], scopes: [...editorScopes, 'events:read'], rate_limit: null, created_at: AT, updated_at: AT };
const apiKey = { id: 2, caller_id: 2, prefix: 'rowi_geej5b4a', description: 'sales system, production', created_at: AT, expires_at: null, last_used_at: LATER, revoked_at: null };
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

export const API_EXAMPLES: Record<string, unknown> = {
  Index: { name: 'rowi', version: '0.1.0', links: { self: '/v1', openapi: '/v1/openapi.json', users: '/v1/users', items: '/v1/items', orders: '/v1/orders', weather: '/v1/weather', limits: '/v1/limits' } },
  Health: { status: 'pass', version: '0.1.0', checks: { database: { status: 'pass', duration_ms: 0.64 }, migrations: { status: 'pass', duration_ms: 3.65 } } },
  Limits: {
    rate_limit: { policy: 'caller', quota: 1200, window_seconds: 60 },
    orders_create: { policy: 'orders-create', quota: 300, window_seconds: 60 },
    failed_authentication: { policy: 'failed-auth', quota: 10, window_seconds: 60 },
    counted: 'instance',
    body_limit_bytes: 1048576,
    page_size_max: 500,
    timeouts_ms: { headers: 10000, request: 30000, keep_alive: 72000, handler: 15000, database: 5000 },
  },
  ProblemType: { type: '/problems/email-taken', status: 409, title: 'Email already in use', description: 'Another user has this email address; emails are compared without regard to case.' },
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
  StockMovement: movement,
  Order: order,
  OrderLine: line,
  OrderLineInput: { item_id: 1, quantity: 2 },
  OrderCreate: { name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 2 }] },
  OrderReplace: { name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 3 }] },
  OrderPatch: { status: 'fulfilled' },
  Weather: {
    id: 1, place: 'tokyo', name: 'Tokyo', latitude: 35.68, longitude: 139.69, temperature_c: 12.5, humidity_pct: 60, wind_kph: 8, conditions: 'partly-cloudy',
    observed_at: '2026-06-01T09:00:00.000Z', source: 'weather-feed', stale: false, created_at: AT, updated_at: AT,
  },
  Observation: observation,
  ObservationInput: { name: 'Tokyo', temperature_c: 12.5, humidity_pct: 60, wind_kph: 8, conditions: 'partly-cloudy', observed_at: '2026-06-01T18:00:00+09:00' },
  PlacePatch: { latitude: 35.68, longitude: 139.69 },
  Caller: caller,
  CallerCreate: { name: 'sales-system', role: 'editor' },
  CallerPatch: { rate_limit: 600 },
  ApiKey: apiKey,
  ApiKeyCreate: { description: 'sales system, production', expires_at: '2027-06-01T00:00:00Z' },
  NewApiKey: { ...apiKey, last_used_at: null, key: 'rowi_geej5b4a_xJQRB8HDy7_cZ_kpLwHaoqUX6OywiXDi773aFBy09uI' },
  AuditEvent: {
    id: 7, at: AT, request_id: 'c0f8f90c-718e-448b-b37d-2242b1b0ee3f', caller_id: 2, caller_name: 'sales-system', credential: 'api_key', method: 'POST', path: '/v1/orders',
    resource: 'orders', record_id: '1', action: 'create', status: 201, duration_ms: 4.2, client_ip: '192.0.2.10',
  },
  Event: { id: 'evt_01a214fb578f000000b9bd50f327', type: 'order.created', created_at: AT, path: '/v1/orders/1', data: order },
  WebhookEndpoint: endpoint,
  WebhookEndpointCreate: { url: 'https://hooks.example.com/rowi', events: ['order.created', 'order.status_changed'], description: 'order desk' },
  WebhookEndpointPatch: { enabled: false },
  WebhookEndpointWithSecret: { ...endpoint, secret: 'whsec_EAT3UyjG4d5HoN9SqsBCe1qnYGVDaYe4/g+mRCu5Usk=' },
  WebhookAttempt: attempt,
  WebhookDelivery: {
    id: 1, endpoint_id: 1, event_id: 'evt_01a214fb578f000000b9bd50f327', event_type: 'order.created', status: 'succeeded', next_attempt_at: null, attempts: [attempt], created_at: AT, updated_at: LATER,
  },
  TokenRequest: { grant_type: 'client_credentials', client_id: 'sales-system', client_secret: 'rowi_geej5b4a_xJQRB8HDy7_cZ_kpLwHaoqUX6OywiXDi773aFBy09uI' },
  Token: { access_token: 'eyJhbGciOiJFUzI1NiIsImtpZCI6IjRlNTlhNmNlIn0.eyJzdWIiOiJzYWxlcy1zeXN0ZW0ifQ.c2lnbmF0dXJl', token_type: 'Bearer', expires_in: 900, scope: 'orders:read orders:create' },
  OAuthError: { error: 'invalid_client', error_description: 'The client id and secret do not match.' },
  JWKS: { keys: [{ kid: '4e59a6ce-969d-4b43-aa41-d6e67c3c7cb8', kty: 'EC', alg: 'ES256', use: 'sig', crv: 'P-256', x: 'v_7iIcN7S4RR0Qo5WnyMc20k2YoFcWQrhVMDKbubjEs', y: 'j8iZlKcPVViXx67mIYv0wkoCUWU_WDc4mSYBrPPzf2I' }] },
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
