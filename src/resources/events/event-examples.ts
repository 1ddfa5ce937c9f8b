import { EVENT_TYPE_NAMES, EVENT_TYPES, type EventType } from '../../outbox/event-types.js';

/**
 * An example event of each type (GET /v1/event-types), made from the examples of the records'
 * schemas in the OpenAPI document (api/examples.ts gives them), so that what the catalogue shows a
 * receiver is what the reference shows for the record. A resource declared beside rowi's own has
 * no example there: its events carry a record made from the schema of its GET /{id}.
 */

type Json = Record<string, unknown>;

/** What a built-in kind of event (the part of its type before the dot) tells of: its record's schema, and the record's path. */
const RECORDS: Record<string, { schema: string; path: (record: Json) => string }> = {
  user: { schema: 'User', path: (user) => `/v1/users/${user.id}` },
  item: { schema: 'Item', path: (item) => `/v1/items/${item.id}` },
  stock: { schema: 'Stock', path: (stock) => `/v1/items/${stock.item_id}/stock` },
  order: { schema: 'Order', path: (order) => `/v1/orders/${order.id}` },
  weather: { schema: 'Weather', path: (weather) => `/v1/weather/${weather.place}` },
  caller: { schema: 'Caller', path: (caller) => `/v1/callers/${caller.id}` },
  api_key: { schema: 'ApiKey', path: (key) => `/v1/callers/${key.caller_id}/keys/${key.id}` },
  operation: { schema: 'Operation', path: (operation) => `/v1/operations/${operation.id}` },
  webhook: { schema: 'WebhookEndpoint', path: (endpoint) => `/v1/webhook-endpoints/${endpoint.id}` },
};

/** When the example events were made: after the example records (api/examples.ts), which the deletions need no time of. */
const AT = '2026-06-01T12:05:00.000Z';

/**
 * The types whose data is more than the record as GET answers it (or its id, for a deletion): what
 * rowi's writes add (outbox/event-types.ts says it in words). `example` reads another schema's example.
 */
const DATA: Record<string, (record: Json, example: (schema: string) => Json) => Json> = {
  'stock.changed': (stock, example) => {
    const { kind, quantity_change, reserved_change, order_id } = example('ExpandedStockMovement');
    return { ...stock, movement: { kind, quantity_change, reserved_change, order_id } };
  },
  'order.status_changed': (order) => ({ ...order, status: 'fulfilled', previous_status: order.status, updated_at: AT }),
  'weather.observed': (weather, example) => ({ ...weather, observation: example('Observation') }),
  'weather.deleted': (weather) => ({ id: weather.id, place: weather.place }),
  'api_key.revoked': (key) => ({ ...key, revoked_at: AT }),
  'operation.progressed': (operation) => ({ ...operation, status: 'running', finished_at: null, summary: null }),
  'webhook.ping': (endpoint) => ({ endpoint_id: endpoint.id, url: endpoint.url }),
};

/** The event of each type, in the catalogue's order, from the OpenAPI document `document`. */
export function exampleEvents(document: Json): Map<EventType, Json> {
  const schemas = ((document.components as Json | undefined)?.schemas ?? {}) as Json;
  const example = (name: string) => madeFrom(schemas[name] as Json | undefined, schemas) as Json;
  const events = new Map<EventType, Json>();
  EVENT_TYPE_NAMES.forEach((type, index) => {
    const [kind] = type.split('.');
    const built = RECORDS[kind!];
    const resource = EVENT_TYPES[type]!.resource;
    const record = built ? example(built.schema) : declaredRecord(document, schemas, resource);
    const path = built ? built.path(record) : `/v1/${resource}/${String(record.id ?? 1)}`;
    const data = DATA[type]?.(record, example) ?? (type.endsWith('.deleted') ? { id: record.id } : record);
    const at = typeof data.updated_at === 'string' ? data.updated_at : AT;
    events.set(type, { id: eventIdAt(at, index), type, created_at: at, path, data });
  });
  return events;
}

/** A declared resource's record: the example of (or one made from) what its GET /v1/{resource}/{id} answers. */
function declaredRecord(document: Json, schemas: Json, resource: string): Json {
  const read = ((document.paths as Json | undefined)?.[`/v1/${resource}/{id}`] as Json | undefined)?.get as
    Json | undefined;
  const content = ((read?.responses as Json | undefined)?.['200'] as Json | undefined)?.content as Json | undefined;
  const made = madeFrom((content?.['application/json'] as Json | undefined)?.schema as Json | undefined, schemas);
  return typeof made === 'object' && made !== null ? (made as Json) : { id: 1 };
}

/** An id as rowi makes them (outbox/event-ids.ts): the time, a counter, a process's part. */
function eventIdAt(at: string, counter: number): string {
  return `evt_${Date.parse(at).toString(16).padStart(12, '0')}${counter.toString(16).padStart(6, '0')}b9bd50f327`;
}

/** A value of a JSON schema of the document: its example where it has one, else one made of its members' examples or of its type. */
function madeFrom(schema: Json | undefined, schemas: Json, depth = 0): unknown {
  if (schema === undefined || depth > 10) return null;
  if (typeof schema.$ref === 'string')
    return madeFrom(schemas[schema.$ref.split('/').at(-1)!] as Json | undefined, schemas, depth + 1);
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  for (const key of ['example', 'const', 'default']) if (key in schema) return schema[key];
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const variants = (schema.oneOf ?? schema.anyOf) as Json[] | undefined;
  if (Array.isArray(variants))
    return madeFrom(variants.find((variant) => variant.type !== 'null') ?? variants[0], schemas, depth + 1);
  switch (schema.type) {
    case 'object':
      return Object.fromEntries(
        Object.entries((schema.properties ?? {}) as Json).map(([name, member]) => [
          name,
          madeFrom(member as Json, schemas, depth + 1),
        ]),
      );
    case 'array':
      return [madeFrom(schema.items as Json | undefined, schemas, depth + 1)];
    case 'integer':
    case 'number':
      return Math.max(1, typeof schema.minimum === 'number' ? schema.minimum : 1);
    case 'boolean':
      return true;
    case 'string':
      return schema.format === 'date-time' ? AT : 'example';
    default:
      return null;
  }
}
