/**
 * What the OpenAPI document says of the API as a whole, as the docs page opens: what rowi is, how to
 * get a key and try an operation, where the guides are; and the groups (tags) its
 * operations are listed under, in the document's order: the resources first, the service's own
 * plumbing (index, probes, problem types) last, as the docs page shows them. Each route names its
 * group in its operation().
 */
export const API_DESCRIPTION = [
  'rowi is the REST interface through which other systems (a sales system, an inventory system, a weather feed) ' +
    'read and change users, items and their stock, orders and weather data.',
  '**To try an operation here**, press *Authorize* and paste an API key as `X-API-Key`. `npm start` prints the ' +
    "first admin's key on an empty database; an admin makes more with `POST /v1/callers` or " +
    '`rowi callers create --name NAME --role reader|editor|admin`. A caller with a client secret may use a bearer ' +
    'token from `POST /oauth/token` instead.',
  "**Guides** (in rowi's `docs/` folder): start and first calls (`start.md`), orders and stock (`orders.md`), " +
    'callers, keys and roles (`security.md`, `access.md`), bulk work (`bulk.md`), reading in bulk (`reading.md`), ' +
    'events and webhooks (`events.md`), backups (`backups.md`), deployment (`deployment.md`); the rules every ' +
    'operation follows (paging, ETags, idempotency, JSON and XML) are in `conventions.md`, the guarantees in ' +
    '`guarantees.md`.',
  'Every operation answers in JSON or XML (chosen by `Accept`), except batches, events and webhook endpoints ' +
    '(JSON only) and what is a file or a stream by nature: exports (CSV, NDJSON), the event stream and the ' +
    'metrics. Every failure is an RFC 9457 problem.',
].join('\n\n');

export const API_TAGS = [
  { name: 'users', description: 'People the other resources refer to' },
  { name: 'items', description: 'Things that are sold, with their stock' },
  { name: 'stock', description: 'Stock of an item and its ledger' },
  { name: 'orders', description: 'Orders that reserve stock' },
  {
    name: 'weather',
    description: 'Places, their recorded observations and the current weather (from the provider when one is set)',
  },
  { name: 'events', description: 'Every change as an event: listed, read, or streamed live (Server-Sent Events)' },
  {
    name: 'webhook-endpoints',
    description:
      'Where events are POSTed, signed as Standard Webhooks says; deliveries and their attempts (admin only)',
  },
  {
    name: 'operations',
    description: 'Long-running operations (imports of files, backups): status, progress, errors, cancelling',
  },
  {
    name: 'backups',
    description: 'Backups of the SQLite file in ROWI_BACKUP_DIR: take one, list them (admin only)',
  },
  { name: 'callers', description: 'Systems that use the API, their roles, grants and API keys (admin only)' },
  { name: 'audit', description: 'Who did what, when, with which outcome (admin only)' },
  { name: 'auth', description: 'OAuth 2.0 client credentials: tokens, keys and metadata' },
  { name: 'service', description: 'The API itself: index, description, problem types' },
] as const;
