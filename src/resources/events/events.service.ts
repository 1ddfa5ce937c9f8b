import { readableResources } from '../../auth/policy.js';
import type { Executor } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import { presentEvent } from '../../outbox/outbox.js';
import { findEventById, findEvents } from '../../outbox/outbox.repository.js';
import { NotFoundError } from '../../errors.js';

export async function listEvents(db: Executor, query: ListQuery, scopes: ReadonlySet<string>) {
  const page = await findEvents(db, query, readableResources(scopes));
  return { ...page, rows: page.rows.map(presentEvent) };
}

/** One event; 404 as well when the caller may not read its resource (its existence is not told). */
export async function getEvent(db: Executor, id: string, scopes: ReadonlySet<string>) {
  const event = await findEventById(db, id);
  if (!event || !readableResources(scopes).includes(event.resource))
    throw new NotFoundError(`There is no event ${id}.`);
  return presentEvent(event);
}
