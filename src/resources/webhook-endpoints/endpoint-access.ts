import type { RequestContext } from '../../auth/context.js';
import { reachOfGrants, readableResources, type Reach } from '../../auth/policy.js';
import type { EndpointWithOwner } from '../../outbox/webhook-endpoints.repository.js';
import { sentResources } from '../../outbox/webhook-owners.js';
import { AppError } from '../../errors.js';

/**
 * Who may change which webhook endpoint. An endpoint acts for its owner, the caller that created
 * it (outbox/webhook-owners.ts); a caller with webhook-endpoints:update must not be able to borrow
 * it to receive what it may not read itself. So a caller may change, ping, rotate, retry or delete
 * an endpoint only if it could have created it as it is (and as the change leaves it): it may read
 * every resource the endpoint sends events of for its owner now. Where events go is the owner's
 * choice alone: only the owner changes the URL (a caller who narrowed later could otherwise keep
 * receiving at a URL it had set on another's endpoint).
 */

/** What a change of an endpoint needs to know of the request: who asks, with which scopes and record access. */
export interface EndpointContext extends Reach {
  /** The caller asking; null for the subject of an external issuer's token. */
  callerId: number | null;
}

/** What a change of an endpoint needs of the request's context. */
export function endpointContext({ access }: RequestContext): EndpointContext {
  const { callerId, scopes, ownRecords, userId } = access;
  return { callerId, scopes, ownRecords, userId };
}

/** The owner a new endpoint gets: the caller creating it. An external issuer's subject is not a caller whose access rowi can check at each delivery. */
export function ownerFor(context: EndpointContext): number {
  if (context.callerId === null)
    throw forbidden(
      "A webhook endpoint acts for a caller of rowi, whose access is checked at every delivery; the subject of an external issuer's token is not one. Use a rowi caller's API key or token.",
    );
  // An endpoint sends what its owner sees, not what a user it acted for sees: a request acting
  // for a user cannot hand its user's narrower sight to an endpoint.
  if (context.userId !== null)
    throw forbidden(
      `This request acts for user ${context.userId}; a webhook endpoint acts for a caller. Use the caller's own API key or token.`,
    );
  return context.callerId;
}

/** The scopes and record access of the endpoint's owner as stored now; undefined when the owner no longer exists. */
export function ownerScopes(endpoint: EndpointWithOwner): Reach | undefined {
  return endpoint.owner === null ? undefined : reachOfGrants(endpoint.owner, endpoint.owner_caller_id);
}

/**
 * 403 webhook-endpoint-forbidden unless the caller could have created the endpoint as it is, or
 * as it will be after the change (`after.resources`: the resources it is to be set up for; `after.url`:
 * whether the URL changes). An endpoint without an owner sends nothing: the caller changing it
 * becomes its owner.
 */
export function assertMayChange(
  endpoint: EndpointWithOwner,
  context: EndpointContext,
  after: { resources?: string; url?: boolean } = {},
): void {
  const callerId = ownerFor(context);
  const scopes = ownerScopes(endpoint);
  if (scopes === undefined) return;
  const readable = new Set(readableResources(context));
  const missing = sentResources(after.resources ?? endpoint.resources, new Set(readableResources(scopes))).filter(
    (resource) => !readable.has(resource),
  );
  if (missing.length > 0) {
    const required = missing.map((resource) => `${resource}:read`);
    throw forbidden(
      `Webhook endpoint ${endpoint.id} sends events of ${missing.join(', ')}, which this caller may not read (${required.join(', ')}): only a caller that could have created it may change it.`,
      required,
    );
  }
  if (after.url === true && endpoint.owner_caller_id !== callerId) {
    throw forbidden(
      `Only its owner (caller ${endpoint.owner_caller_id}) may change where webhook endpoint ${endpoint.id} sends events; create an endpoint of your own instead.`,
    );
  }
}

function forbidden(detail: string, required: string[] = []): AppError {
  return new AppError(
    'webhook-endpoint-forbidden',
    detail,
    required.length > 0 ? { extensions: { required_scopes: required } } : {},
  );
}
