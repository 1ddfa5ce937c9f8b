import type { Executor } from '../db/database.js';
import type { WebhookEndpointRow } from '../db/event-tables.js';
import { fetchPage, type ListQuery } from '../db/paging.js';

export type StoredEndpoint = WebhookEndpointRow;

export type NewEndpoint = Omit<StoredEndpoint, 'id' | 'version' | 'failures' | 'disabled_reason' | 'previous_secret' | 'previous_secret_expires_at'>;

export function insertEndpoint(db: Executor, endpoint: NewEndpoint): Promise<StoredEndpoint> {
  return db.insertInto('webhook_endpoints').values({ ...endpoint, failures: 0, version: 1 }).returningAll().executeTakeFirstOrThrow();
}

export function findEndpointById(db: Executor, id: number): Promise<StoredEndpoint | undefined> {
  return db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findEndpoints(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('webhook_endpoints').selectAll(), query);
}

export function findEnabledEndpoints(db: Executor): Promise<StoredEndpoint[]> {
  return db.selectFrom('webhook_endpoints').selectAll().where('enabled', '=', 1).orderBy('id').execute();
}

export type EndpointChanges = Partial<Pick<StoredEndpoint, 'url' | 'description' | 'events' | 'resources' | 'enabled' | 'disabled_reason' | 'failures' | 'secret' | 'previous_secret' | 'previous_secret_expires_at'>>;

/** Changes the endpoint if it is still at `version`, with a new version; undefined when it moved. */
export function updateEndpointAtVersion(db: Executor, id: number, version: number, changes: EndpointChanges, now: string): Promise<StoredEndpoint | undefined> {
  return db
    .updateTable('webhook_endpoints')
    .set({ ...changes, version: version + 1, updated_at: now })
    .where('id', '=', id)
    .where('version', '=', version)
    .returningAll()
    .executeTakeFirst();
}

/** One more failed attempt in a row; answers the count. */
export async function countEndpointFailure(db: Executor, id: number): Promise<number> {
  const row = await db.updateTable('webhook_endpoints').set((eb) => ({ failures: eb('failures', '+', 1) })).where('id', '=', id).returning('failures').executeTakeFirst();
  return row?.failures ?? 0;
}

export async function resetEndpointFailures(db: Executor, id: number): Promise<void> {
  await db.updateTable('webhook_endpoints').set({ failures: 0 }).where('id', '=', id).where('failures', '>', 0).execute();
}

/** Disables the endpoint (a new version) because its deliveries keep failing. */
export async function disableFailingEndpoint(db: Executor, id: number, reason: string, now: string): Promise<void> {
  await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({ enabled: 0, disabled_reason: reason, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', id)
    .where('enabled', '=', 1)
    .execute();
}
