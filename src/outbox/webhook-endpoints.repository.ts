import type { Executor } from '../db/database.js';
import type { WebhookEndpointRow } from '../db/event-tables.js';
import type { OwnerGrants } from './webhook-owners.js';

export type StoredEndpoint = WebhookEndpointRow;
/** An endpoint with its owner's grants as stored now; owner null when that caller no longer exists. */
export type EndpointWithOwner = StoredEndpoint & { owner: OwnerGrants | null };

/**
 * The columns an endpoint is read with (all of them: its secrets sign its deliveries). The engine
 * reads a page of endpoints and writes one from them (resources/webhook-endpoints); its read of one
 * takes its owner's grants too (findEndpointWithOwner).
 */
export const ENDPOINT_COLUMNS = [
  'id',
  'url',
  'description',
  'events',
  'resources',
  'owner_caller_id',
  'enabled',
  'disabled_reason',
  'failures',
  'secret',
  'previous_secret',
  'previous_secret_expires_at',
  'version',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof StoredEndpoint)[];

function selectWithOwner(db: Executor) {
  return db
    .selectFrom('webhook_endpoints as e')
    .leftJoin('callers as c', 'c.id', 'e.owner_caller_id')
    .selectAll('e')
    .select([
      'c.role as owner_role',
      'c.extra_scopes as owner_extra_scopes',
      'c.removed_scopes as owner_removed_scopes',
      'c.own_records as owner_own_records',
    ]);
}

type RowWithOwner = StoredEndpoint & {
  owner_role: OwnerGrants['role'] | null;
  owner_extra_scopes: string | null;
  owner_removed_scopes: string | null;
  owner_own_records: string | null;
};

function withOwner({
  owner_role,
  owner_extra_scopes,
  owner_removed_scopes,
  owner_own_records,
  ...endpoint
}: RowWithOwner): EndpointWithOwner {
  return {
    ...endpoint,
    owner:
      owner_role === null
        ? null
        : {
            role: owner_role,
            extra_scopes: owner_extra_scopes ?? '',
            removed_scopes: owner_removed_scopes ?? '',
            own_records: owner_own_records ?? '',
          },
  };
}

/** The enabled endpoints, each with its owner's grants as they are now. */
export async function findEnabledEndpoints(db: Executor): Promise<EndpointWithOwner[]> {
  const rows = await selectWithOwner(db).where('e.enabled', '=', 1).orderBy('e.id').execute();
  return rows.map(withOwner);
}

/** Whether any endpoint is enabled: a read of one row at most (the endpoints are few; this is asked every second). */
export async function anyEnabledEndpoint(db: Executor): Promise<boolean> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('enabled', '=', 1)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export async function findEndpointWithOwner(db: Executor, id: number): Promise<EndpointWithOwner | undefined> {
  const row = await selectWithOwner(db).where('e.id', '=', id).executeTakeFirst();
  return row && withOwner(row);
}

export type EndpointChanges = Partial<
  Pick<
    StoredEndpoint,
    | 'url'
    | 'description'
    | 'events'
    | 'resources'
    | 'owner_caller_id'
    | 'enabled'
    | 'disabled_reason'
    | 'failures'
    | 'secret'
    | 'previous_secret'
    | 'previous_secret_expires_at'
  >
>;

/** More failed attempts in a row; answers the count. */
export async function addEndpointFailures(db: Executor, id: number, count: number): Promise<number> {
  const row = await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({ failures: eb('failures', '+', count) }))
    .where('id', '=', id)
    .returning('failures')
    .executeTakeFirst();
  return row?.failures ?? 0;
}

export async function resetEndpointFailures(db: Executor, id: number): Promise<void> {
  await db
    .updateTable('webhook_endpoints')
    .set({ failures: 0 })
    .where('id', '=', id)
    .where('failures', '>', 0)
    .execute();
}

/** Disables the endpoint (a new version) for a reason of rowi's: its deliveries keep failing, its owner is gone. */
export async function disableEndpoint(db: Executor, id: number, reason: string, now: string): Promise<void> {
  await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({ enabled: 0, disabled_reason: reason, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', id)
    .where('enabled', '=', 1)
    .execute();
}
