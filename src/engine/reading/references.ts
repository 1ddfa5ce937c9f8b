import type { FastifyRequest } from 'fastify';
import { challenge } from '../../auth/challenge.js';
import type { Seer } from '../../auth/visibility.js';
import { AppError } from '../../errors.js';

/**
 * What the caller of a write may read, so that the answer tells it no more (docs/security.md).
 * A body that refers to records of a collection the caller may not read (an order's user and
 * items) is refused with 403 before anything is looked up, in the same words whether those records
 * exist or not: otherwise "there is no user 99999" against a 201 would tell which users exist. And
 * a refusal counts nothing the caller may not read: an order short of stock says which lines are
 * short, and how many are available only to a caller that may read stock.
 */
export interface Reader extends Seer {
  name: string;
  scopes: ReadonlySet<string>;
}

/** The authenticated caller of a route that needs credentials. */
export function readerOf(request: FastifyRequest): Reader {
  return request.context!.access;
}

export function mayRead(reader: Reader, resource: string): boolean {
  return reader.scopes.has(`${resource}:read`);
}

/** Where a body refers to records of a collection. */
export interface Reference {
  resource: 'users' | 'items';
  /** JSON Pointer to the reference in the body. */
  pointer: string;
}

/** 403 insufficient-scope unless the caller may read every collection the references point into. */
export function assertMayRefer(reader: Reader, references: readonly Reference[]): void {
  const refused = references.filter((reference) => !mayRead(reader, reference.resource));
  if (refused.length === 0) return;
  const resources = [...new Set(refused.map((reference) => reference.resource))];
  const missing = resources.map((resource) => `${resource}:read`);
  const detail = `${reader.name} may not refer to ${resources.join(' or ')}: it lacks ${missing.join(' and ')}, and is not told which ${resources.join(' or ')} exist.`;
  throw new AppError('insufficient-scope', detail, {
    headers: { 'www-authenticate': challenge('insufficient_scope', detail, missing.join(' ')) },
    extensions: { required_scopes: missing },
    errors: refused.map((reference) => ({
      in: 'body',
      pointer: reference.pointer,
      detail: `refers to ${reference.resource}, which needs ${reference.resource}:read`,
    })),
  });
}
