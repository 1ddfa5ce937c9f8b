import { readableResources, type Reach } from '../../auth/policy.js';
import { nowTimestamp } from '../../db/clock.js';
import type { Executor, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import { SEES_ALL } from '../../db/visibility.js';
import { resourceOf } from '../../outbox/event-types.js';
import { newSecret } from '../../outbox/signing.js';
import {
  ENDPOINT_COLUMNS,
  findEndpointWithOwner,
  type EndpointChanges,
  type EndpointWithOwner,
  type StoredEndpoint,
} from '../../outbox/webhook-endpoints.repository.js';
import { ConflictError, UnprocessableError, type FieldError } from '../../errors.js';
import type { VersionCondition } from '../../http/records.js';
import { recordService } from '../../engine/records.js';
import { assertMayChange, ownerFor, ownerScopes, type EndpointContext } from './endpoint-access.js';
import type { WebhookEndpoint, WebhookEndpointCreate, WebhookEndpointPatch } from './webhook-endpoints.schema.js';

/**
 * Webhook endpoints (docs/events.md): where events are POSTed, which types, and the secret that
 * signs them. An endpoint acts for its owner, the caller that created it: it receives events only
 * of the resources its owner may read (checked again at every delivery), so a webhook never shows
 * what its owner could not GET; endpoint-access.ts says who may change it.
 */
export interface EndpointView {
  id: number;
  url: string;
  owner_caller_id: number | null;
  description: string;
  events: WebhookEndpoint['events'];
  enabled: boolean;
  disabled_reason: string | null;
  failed_attempts: number;
  previous_secret_expires_at: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export function presentEndpoint(endpoint: StoredEndpoint): EndpointView {
  const previousActive =
    endpoint.previous_secret_expires_at !== null && endpoint.previous_secret_expires_at > nowTimestamp();
  return {
    id: endpoint.id,
    url: endpoint.url,
    owner_caller_id: endpoint.owner_caller_id,
    description: endpoint.description,
    // Stored as the JSON of a validated list.
    events: JSON.parse(endpoint.events) as WebhookEndpoint['events'],
    enabled: endpoint.enabled === 1,
    disabled_reason: endpoint.disabled_reason,
    failed_attempts: endpoint.failures,
    previous_secret_expires_at: previousActive ? endpoint.previous_secret_expires_at : null,
    version: endpoint.version,
    created_at: endpoint.created_at,
    updated_at: endpoint.updated_at,
  };
}

/**
 * Webhook endpoints as the engine stores them (engine/records.ts): no owner in the records' sense (who
 * sees them is the scope's alone), no events of their own changes; read with their owner's grants,
 * stored as made from the whole body, and changed only by a caller that may (endpoint-access.ts).
 */
export const ENDPOINTS = recordService<StoredEndpoint, WebhookEndpointCreate, EndpointContext, EndpointWithOwner>({
  resource: 'webhook-endpoints',
  path: '/v1/webhook-endpoints',
  noun: 'Webhook endpoint',
  table: 'webhook_endpoints',
  columns: ENDPOINT_COLUMNS,
  ownerless: true,
  read: findEndpointWithOwner,
  stores: newEndpoint,
  patches: changedColumns,
  present: presentEndpoint,
  mayChange(stored, context, patch) {
    if (patch === undefined) return assertMayChange(stored, context);
    const setUp = changedSetUp(stored, patch, context);
    assertMayChange(stored, context, {
      resources: setUp.resources ?? stored.resources,
      url: setUp.url !== undefined,
    });
  },
});

export async function getEndpoint(db: Executor, id: number): Promise<EndpointView> {
  return presentEndpoint(await findStoredEndpoint(db, id));
}

export function findStoredEndpoint(db: Executor, id: number): Promise<EndpointWithOwner> {
  return ENDPOINTS.get(db, id, SEES_ALL);
}

export async function listEndpoints(db: Executor, query: ListQuery) {
  const page = await ENDPOINTS.list(db, query, SEES_ALL);
  return { ...page, rows: page.rows.map(presentEndpoint) };
}

/** The URL has been checked (AddressPolicy.assertAllowed) before the unit of work. */
export async function createEndpoint(
  trx: Trx,
  input: WebhookEndpointCreate,
  context: EndpointContext,
): Promise<EndpointView & { secret: string }> {
  const stored = await ENDPOINTS.create(trx, input, null, context);
  return { ...presentEndpoint(stored), secret: stored.secret };
}

/** A new endpoint's columns: it acts for the caller creating it, for the types asked for (every one by default). */
function newEndpoint(input: WebhookEndpointCreate, context: EndpointContext): Partial<StoredEndpoint> {
  const events = input.events ?? ['*'];
  return {
    url: storedUrl(input.url),
    owner_caller_id: ownerFor(context),
    description: input.description ?? '',
    events: JSON.stringify(events),
    resources: JSON.stringify(allowedResources(events, context, 'this caller')),
    enabled: input.enabled === false ? 0 : 1,
    secret: newSecret(),
    failures: 0,
  };
}

/**
 * JSON Merge Patch of url, events, enabled and description; enabling an endpoint starts its
 * failure count again. The events are checked against what its owner may read; an endpoint
 * without an owner (deleted) becomes the changing caller's, and is set up for what it may read.
 */
export async function patchEndpoint(
  trx: Trx,
  id: number,
  patch: WebhookEndpointPatch,
  condition: VersionCondition,
  context: EndpointContext,
): Promise<EndpointView> {
  return presentEndpoint(await ENDPOINTS.patch(trx, id, patch, condition, SEES_ALL, context));
}

/** What a patch changes of where the endpoint sends and for whom: its URL, owner, events and their resources. */
function changedSetUp(
  stored: EndpointWithOwner,
  patch: Partial<WebhookEndpointCreate>,
  context: EndpointContext,
): EndpointChanges {
  const owner = ownerScopes(stored);
  const url = patch.url === undefined ? stored.url : storedUrl(patch.url);
  const changes: EndpointChanges = {};
  if (url !== stored.url) changes.url = url;
  if (owner === undefined) changes.owner_caller_id = ownerFor(context);
  if (patch.events !== undefined || owner === undefined) {
    const events = patch.events ?? (JSON.parse(stored.events) as string[]);
    const resources = JSON.stringify(
      owner === undefined
        ? allowedResources(events, context, 'this caller')
        : allowedResources(events, owner, `its owner (caller ${stored.owner_caller_id})`),
    );
    if (JSON.stringify(events) !== stored.events) changes.events = JSON.stringify(events);
    if (resources !== stored.resources) changes.resources = resources;
  }
  return changes;
}

/** The columns a patch changes (those that differ from the stored ones). */
function changedColumns(
  stored: EndpointWithOwner,
  patch: Partial<WebhookEndpointCreate>,
  context: EndpointContext,
): EndpointChanges {
  const changes = changedSetUp(stored, patch, context);
  if (patch.description !== undefined && patch.description !== stored.description)
    changes.description = patch.description;
  if (patch.enabled !== undefined && (patch.enabled ? 1 : 0) !== stored.enabled) {
    changes.enabled = patch.enabled ? 1 : 0;
    changes.disabled_reason = null;
    if (patch.enabled) changes.failures = 0;
  }
  return changes;
}

export function deleteEndpoint(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  context: EndpointContext,
): Promise<void> {
  return ENDPOINTS.remove(trx, id, condition, SEES_ALL, context);
}

/**
 * A new signing secret; the current one keeps signing beside it for `overlapSeconds`. Refused
 * while an earlier rotation's overlap lasts: a third secret would drop one receivers may still use.
 */
export async function rotateSecret(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  overlapSeconds: number,
  context: EndpointContext,
): Promise<EndpointView & { secret: string }> {
  const rotated = await ENDPOINTS.update(
    trx,
    id,
    condition,
    (stored) => rotation(stored, overlapSeconds),
    SEES_ALL,
    context,
  );
  return { ...presentEndpoint(rotated), secret: rotated.secret };
}

function rotation(stored: StoredEndpoint, overlapSeconds: number): EndpointChanges {
  if (stored.previous_secret_expires_at !== null && stored.previous_secret_expires_at > nowTimestamp()) {
    throw new ConflictError(
      'rotation-in-progress',
      `Webhook endpoint ${stored.id}'s previous secret signs until ${stored.previous_secret_expires_at}; rotate again after that.`,
      {
        previous_secret_expires_at: stored.previous_secret_expires_at,
      },
    );
  }
  const expires = new Date(Date.now() + overlapSeconds * 1000).toISOString();
  return { secret: newSecret(), previous_secret: stored.secret, previous_secret_expires_at: expires };
}

/**
 * The URL as rowi will call it (the WHATWG serialisation: host in lower case and punycode,
 * backslashes as slashes, a path of at least "/"), so that what is listed is what is called. Its
 * characters were checked by the schema: nothing the parser drops (tab, CR, LF) is left.
 */
function storedUrl(text: string): string {
  return new URL(text).href;
}

/** The resources an endpoint may receive events of: those of the types it asks for that `whose` scopes may read; 422 for a type they may not. */
function allowedResources(events: readonly string[], reach: Reach, whose: string): string[] {
  const readable = readableResources(reach);
  if (events.includes('*')) {
    if (events.length > 1)
      throw new UnprocessableError('events: "*" already means every type; give it alone.', [
        { in: 'body', pointer: '#/events', detail: '"*" must be the only member' },
      ]);
    return readable.filter((resource) => resource !== 'webhook-endpoints');
  }
  const errors: FieldError[] = [];
  events.forEach((type, index) => {
    const resource = resourceOf(type);
    if (!readable.includes(resource))
      errors.push({
        in: 'body',
        pointer: `#/events/${index}`,
        detail: `${type} is an event of ${resource}, which ${whose} may not read (${resource}:read)`,
      });
  });
  if (errors.length > 0)
    throw new UnprocessableError(`The endpoint asks for events of resources ${whose} may not read.`, errors);
  return [...new Set(events.map((type) => resourceOf(type)))].sort();
}
