/** What an event type is of and what it tells. */
export interface EventTypeRule {
  /** The resource whose read scope sees it (a caller without orders:read never sees an order event). */
  resource: string;
  description: string;
}

/**
 * Every event type rowi writes, with the resource whose read scope sees it and what it tells; a
 * resource declared before the app is built adds its own (declareEventTypes). The catalogue is
 * served in the OpenAPI document (the `type` enum) and checked against the documentation.
 */
const rules: Record<string, EventTypeRule> = {
  'user.created': { resource: 'users', description: 'A user was created; data is the user.' },
  'user.updated': { resource: 'users', description: "A user's fields changed; data is the user as stored." },
  'user.deleted': { resource: 'users', description: 'A user was deleted; data holds its id.' },
  'item.created': { resource: 'items', description: 'An item was created (its stock at 0); data is the item.' },
  'item.updated': { resource: 'items', description: "An item's fields changed; data is the item as stored." },
  'item.deleted': { resource: 'items', description: 'An item was deleted with its stock; data holds its id.' },
  'stock.changed': {
    resource: 'stock',
    description:
      "An item's stock moved; data is the stock after the move, with the movement that caused it (set, reserve, release or fulfil, and the order).",
  },
  'order.created': { resource: 'orders', description: 'An order was placed, reserving its stock; data is the order.' },
  'order.replaced': {
    resource: 'orders',
    description: "An order's name, user or lines were replaced (PUT); data is the order as stored.",
  },
  'order.updated': {
    resource: 'orders',
    description: "An order's name, user or lines changed (PATCH) without a change of status; data is the order.",
  },
  'order.status_changed': {
    resource: 'orders',
    description:
      'An order was fulfilled or cancelled (possibly with other changes); data is the order, with `previous_status`.',
  },
  'order.deleted': {
    resource: 'orders',
    description: 'An order was deleted (releasing what it reserved); data holds its id.',
  },
  'weather.observed': {
    resource: 'weather',
    description: "An observation of a place was recorded (or corrected); data is the place's weather.",
  },
  'weather.updated': {
    resource: 'weather',
    description: "A place's name or coordinates changed; data is the place's weather.",
  },
  'weather.deleted': {
    resource: 'weather',
    description: 'A place was deleted with its observations; data holds its place.',
  },
  'caller.created': { resource: 'callers', description: 'A caller was created; data is the caller.' },
  'caller.updated': {
    resource: 'callers',
    description: "A caller's name, role or grants changed; data is the caller.",
  },
  'caller.deleted': { resource: 'callers', description: 'A caller was deleted with its keys; data holds its id.' },
  'api_key.created': {
    resource: 'callers',
    description: 'An API key was made for a caller; data is the key without its secret.',
  },
  'api_key.revoked': { resource: 'callers', description: 'An API key was revoked; data is the key.' },
  'operation.progressed': {
    resource: 'operations',
    description:
      'An import went on (at most one a second per operation, and after each chunk it committed at most), or a backup was queued or started; data is the operation, with its progress.',
  },
  'operation.completed': {
    resource: 'operations',
    description:
      'An import or a backup ended: succeeded, failed or cancelled; data is the operation, with its summary (an import: the rows it committed; a backup: the file written).',
  },
  'webhook.ping': {
    resource: 'webhook-endpoints',
    description:
      'A test event sent to one webhook endpoint by POST /v1/webhook-endpoints/{id}/ping; never fanned out to others.',
  },
};

/** An event type's name (user.created): one of EVENT_TYPE_NAMES. */
export type EventType = string;

export const EVENT_TYPES: Readonly<Record<string, Readonly<EventTypeRule>>> = rules;

const names: EventType[] = Object.keys(rules);

/** Every event type, the built-in ones first, then the declared ones in the order declared. */
export const EVENT_TYPE_NAMES: readonly EventType[] = names;

/**
 * Adds the event types of a resource declared before the app is built (its schemas and the
 * OpenAPI document list them from then on). Returns what undoes it.
 */
export function declareEventTypes(types: Record<string, EventTypeRule>): () => void {
  const added = Object.keys(types);
  for (const type of added) if (isEventType(type)) throw new Error(`The event type ${type} is declared already`);
  for (const type of added) {
    rules[type] = { ...types[type]! };
    names.push(type);
  }
  return () => {
    for (const type of added) {
      delete rules[type];
      names.splice(names.indexOf(type), 1);
    }
  };
}

export function isEventType(text: string): text is EventType {
  return Object.hasOwn(rules, text);
}

/** The resource whose read scope sees events of this type; a type never declared is a programming error. */
export function resourceOf(type: EventType): string {
  if (!isEventType(type)) throw new Error(`${type} is no event type: declare it with declareEventTypes`);
  return rules[type]!.resource;
}
