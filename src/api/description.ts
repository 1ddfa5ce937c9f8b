/**
 * What the OpenAPI document says of the API as a whole: what it is, and the groups (tags) its
 * operations are listed under, in the document's order: the resources first, the service's own
 * plumbing (index, probes, problem types) last, as the docs page shows them. Each route names its
 * group in its operation().
 */
export const API_DESCRIPTION =
  'Resource-Oriented Web Interface: users, items, stock, orders and weather over REST. ' +
  'Every operation answers in JSON or XML (chosen by Accept), except batches, events and webhook endpoints (JSON only) and what is a file or a stream by nature, offered in that form only: exports of lists (CSV, NDJSON), the event stream and the metrics; every failure is an RFC 9457 problem. ' +
  "XML maps JSON one-to-one: members become child elements, array items are wrapped in the array's element " +
  'and named by the item schema\'s xml.name (or "i"), and null is an empty element with nil="true".';

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
