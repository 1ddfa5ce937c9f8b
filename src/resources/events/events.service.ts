import type { Reach } from '../../auth/policy.js';
import { eventSightOf } from '../../auth/visibility.js';
import type { Executor } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import { eventVisible } from '../../db/visibility.js';
import { presentEvent } from '../../outbox/outbox.js';
import { findEventById, findEvents } from '../../outbox/outbox.repository.js';
import { NotFoundError } from '../../errors.js';

/** A page of the events the caller sees: of the resources it may read, the records it sees there. */
export async function listEvents(db: Executor, query: ListQuery, reach: Reach) {
  const page = await findEvents(db, query, eventSightOf(reach));
  return { ...page, rows: page.rows.map(presentEvent) };
}

/** One event; 404 as well when the caller may not see the record it tells of (its existence is not told). */
export async function getEvent(db: Executor, id: string, reach: Reach) {
  const event = await findEventById(db, id);
  if (!event || !eventVisible(eventSightOf(reach), event)) throw new NotFoundError(`There is no event ${id}.`);
  return presentEvent(event);
}
