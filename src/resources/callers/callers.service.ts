import {
  CALLER_MANAGEMENT_CORE,
  canManageCallers,
  isGrantable,
  parseScopeList,
  scopesOf,
  ALL_SCOPES,
  OWNED_RESOURCES,
  ownRecordsOf,
  recordAccessOf,
  ROLE_OWN_RECORDS,
  type RecordAccess,
  isScope,
  type Scope,
} from '../../auth/policy.js';
import type { RequestContext } from '../../auth/context.js';
import { nowTimestamp } from '../../db/clock.js';
import type { Executor, Role, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import { SEES_ALL } from '../../db/visibility.js';
import { ConflictError, UnprocessableError, type FieldError } from '../../errors.js';
import type { VersionCondition } from '../../http/records.js';
import { recordService } from '../../engine/records.js';
import {
  CALLER_COLUMNS,
  findAdmins,
  lockCallerManagement,
  type CallerFields,
  type StoredCaller,
} from '../../auth/callers.repository.js';
import type { Identity } from './callers.schema.js';

/** A caller as the API shows it: grants as arrays, and the scopes they add up to. */
export interface CallerView {
  id: number;
  name: string;
  role: Role;
  extra_scopes: Scope[];
  removed_scopes: Scope[];
  scopes: Scope[];
  record_access: RecordAccess;
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
  version: number;
}

export interface CallerInput {
  name: string;
  role: Role;
  extra_scopes?: string[];
  removed_scopes?: string[];
  record_access?: Partial<RecordAccess>;
  rate_limit?: number | null;
}

export type CallerPatch = Partial<CallerInput> & {
  id?: number;
  created_at?: string;
  updated_at?: string;
  scopes?: string[];
};

export function presentCaller(caller: StoredCaller): CallerView {
  // Stored grants were checked when written; a scope a later rowi no longer knows is not shown.
  const extra = parseScopeList(caller.extra_scopes).filter(isScope);
  const removed = parseScopeList(caller.removed_scopes).filter(isScope);
  const held = scopesOf(caller.role, extra, removed);
  return {
    id: caller.id,
    name: caller.name,
    role: caller.role,
    extra_scopes: extra,
    removed_scopes: removed,
    scopes: ALL_SCOPES.filter((scope) => held.has(scope)),
    record_access: recordAccessOf(ownRecordsOf(caller.own_records)),
    rate_limit: caller.rate_limit,
    created_at: caller.created_at,
    updated_at: caller.updated_at,
    version: caller.version,
  };
}

/**
 * Who a request is (GET /v1/callers/me), from its context as authentication resolved it: the
 * scopes and record access it holds now, which for a token may be fewer than its caller's.
 */
export function identityOf({ access, budget }: RequestContext): Identity {
  return {
    caller_id: access.callerId,
    name: access.name,
    role: budget.role,
    credential: access.credential,
    scopes: [...access.scopes].filter(isScope).sort(),
    record_access: recordAccessOf(access.ownRecords),
    user_id: access.userId,
  };
}

/**
 * Callers as the engine stores them (engine/records.ts): a name no two share, a role and its grants,
 * stored as made from the whole body (grants as lists, record access as the resources seen own-only);
 * no owner, as only admins see them. Changes and deletions take turns with every change that could
 * leave nobody able to manage callers, and refuse the one that would (the last admin).
 */
export const CALLERS = recordService<StoredCaller, CallerInput>({
  resource: 'callers',
  path: '/v1/callers',
  noun: 'Caller',
  table: 'callers',
  columns: CALLER_COLUMNS,
  ownerless: true,
  stores: checkedFields,
  patches: (stored, patch) => checkedFields(patchedInput(stored, patch)),
  unique: {
    constraint: 'callers.name',
    field: 'name',
    problem: 'caller-name-taken',
    detail: (name) => `Another caller is already named ${name}.`,
  },
  events: { created: 'caller.created', updated: 'caller.updated', deleted: 'caller.deleted' },
  present: presentCaller,
  takeTurns: lockCallerManagement,
  // scopes is what role and grants add up to: it may be echoed as read, in any order.
  echoesDiffering: (stored, body) => {
    const { scopes } = body as CallerPatch;
    return scopes !== undefined && !sameMembers(scopes, presentCaller(stored).scopes) ? ['scopes'] : [];
  },
  // Only an admin manages callers: changing any other caller cannot end that.
  async assertChange(trx, stored, columns) {
    if (stored.role !== 'admin') return;
    const id = stored.id;
    // checkedFields made every column.
    const { role, removed_scopes } = columns as CallerFields;
    const removed = parseScopeList(removed_scopes);
    await assertManagementSurvives(trx, { callerId: id, role, removed }, () =>
      role !== 'admin'
        ? `Caller ${id} is the last caller that can manage callers; demoting it to ${role} would leave nobody able to.`
        : `Removing ${CALLER_MANAGEMENT_CORE.filter((scope) => removed.includes(scope)).join(' and ')} from caller ${id} would leave no caller that can manage callers (that takes callers:read and callers:update).`,
    );
  },
  async beforeDelete(trx, stored) {
    if (stored.role !== 'admin') return;
    await assertManagementSurvives(
      trx,
      { callerId: stored.id, deleted: true },
      () => `Caller ${stored.id} is the last caller that can manage callers; deleting it would leave nobody able to.`,
    );
  },
});

export async function getCaller(db: Executor, id: number): Promise<CallerView> {
  return presentCaller(await findStoredCaller(db, id));
}

export async function listCallers(db: Executor, query: ListQuery) {
  const page = await CALLERS.list(db, query, SEES_ALL);
  return { rows: page.rows.map(presentCaller), nextAfter: page.nextAfter };
}

export async function createCaller(trx: Trx, input: CallerInput): Promise<CallerView> {
  return presentCaller(await CALLERS.create(trx, input, null));
}

/** JSON Merge Patch of name, role and grants; the last caller that can manage callers cannot stop being one. */
export async function patchCaller(
  trx: Trx,
  id: number,
  patch: CallerPatch,
  condition: VersionCondition,
): Promise<CallerView> {
  return presentCaller(await CALLERS.patch(trx, id, patch, condition, SEES_ALL));
}

/** Deleting a caller deletes its keys; its audit events stay, naming it. */
export function deleteCaller(trx: Trx, id: number, condition: VersionCondition): Promise<void> {
  return CALLERS.remove(trx, id, condition, SEES_ALL);
}

export const callerPath = (id: number) => `/v1/callers/${id}`;

function sameMembers(echoed: readonly string[], stored: readonly string[]): boolean {
  const set = new Set(echoed);
  return set.size === stored.length && stored.every((scope) => set.has(scope));
}

export function findStoredCaller(db: Executor, id: number): Promise<StoredCaller> {
  return CALLERS.get(db, id, SEES_ALL);
}

/** The whole caller a merge patch makes with the stored one, as a create body would give it. */
function patchedInput(stored: StoredCaller, patch: CallerPatch): CallerInput {
  const current = presentCaller(stored);
  return {
    name: patch.name ?? current.name,
    role: patch.role ?? current.role,
    extra_scopes: patch.extra_scopes ?? current.extra_scopes,
    removed_scopes: patch.removed_scopes ?? current.removed_scopes,
    // A new role brings its own default record access, which the patch's record_access then changes.
    record_access: {
      ...(patch.role !== undefined && patch.role !== stored.role
        ? recordAccessOf(new Set(ROLE_OWN_RECORDS[patch.role]))
        : current.record_access),
      ...patch.record_access,
    },
    // Merge patch: null sets the role's default back, absent keeps what is stored.
    rate_limit: patch.rate_limit === undefined ? current.rate_limit : patch.rate_limit,
  };
}

function checkedFields(input: CallerInput): CallerFields {
  const extra = [...new Set(input.extra_scopes ?? [])];
  const removed = [...new Set(input.removed_scopes ?? [])];
  const errors: FieldError[] = extra
    .map((scope, index) => ({ scope, index }))
    .filter(({ scope }) => !isGrantable(scope as Scope))
    .map(({ index }) => ({
      in: 'body',
      pointer: `#/extra_scopes/${index}`,
      detail: 'caller management comes only with the admin role',
    }));
  if (errors.length > 0)
    throw new UnprocessableError(
      'Caller management scopes cannot be granted; give the caller the admin role instead.',
      errors,
    );
  return {
    name: input.name,
    role: input.role,
    extra_scopes: extra.join(' '),
    removed_scopes: removed.join(' '),
    own_records: ownRecordsText(input.role, input.record_access),
    rate_limit: input.rate_limit ?? null,
  };
}

/** The stored form of record access: the resources seen own-only, the role's default where the input names none. */
function ownRecordsText(role: Role, access: Partial<RecordAccess> = {}): string {
  const defaults = new Set(ROLE_OWN_RECORDS[role]);
  return OWNED_RESOURCES.filter(
    (resource) => (access[resource] ?? (defaults.has(resource) ? 'own' : 'all')) === 'own',
  ).join(' ');
}

/** What a change does to one caller, as far as managing callers goes. */
export interface ManagementChange {
  callerId: number;
  role?: Role;
  removed?: string[];
  deleted?: boolean;
  /** Working API keys the change takes from it. */
  keysLost?: number;
}

/**
 * Refuses (409 last-admin) a change after which no caller could manage callers: none would hold
 * the admin role with callers:read and callers:update and a working API key, so nobody could
 * create, repair or re-key a caller through the API again. `why` says what this change does.
 * The caller holds lockCallerManagement.
 */
export async function assertManagementSurvives(trx: Trx, change: ManagementChange, why: () => string): Promise<void> {
  const admins = await findAdmins(trx, nowTimestamp());
  const manages = (admin: { role: Role; removed: string[]; workingKeys: number }) =>
    admin.workingKeys > 0 && canManageCallers(admin.role, admin.removed);
  const before = admins.map((admin) => ({
    id: admin.id,
    role: 'admin' as Role,
    removed: parseScopeList(admin.removed_scopes),
    workingKeys: admin.working_keys,
  }));
  const after = before
    .filter((admin) => !(admin.id === change.callerId && change.deleted))
    .map((admin) =>
      admin.id === change.callerId
        ? {
            ...admin,
            role: change.role ?? admin.role,
            removed: change.removed ?? admin.removed,
            workingKeys: admin.workingKeys - (change.keysLost ?? 0),
          }
        : admin,
    );
  if (after.some(manages) || !before.some(manages)) return;
  throw new ConflictError(
    'last-admin',
    `${why()} Make another caller an admin and give it an API key first (or, with access to the database, run rowi callers create).`,
  );
}
