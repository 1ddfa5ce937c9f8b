import { recordEvent } from '../../outbox/outbox.js';
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
import { nowTimestamp } from '../../db/clock.js';
import type { Executor, Role, Trx } from '../../db/database.js';
import { isUniqueViolation } from '../../db/driver-errors.js';
import type { ListQuery } from '../../db/keyset.js';
import { deleteAtVersion } from '../../db/versioned.js';
import { ConflictError, NotFoundError, UnprocessableError, type FieldError } from '../../errors.js';
import type { VersionCondition } from '../../http/records.js';
import {
  assertCondition,
  assertReadOnlyEchoes,
  withRowLocked,
  DELETED,
  VERSION_MOVED,
  written,
} from '../../engine/preconditions.js';
import {
  findCallerById,
  findAdmins,
  findCallers,
  insertCaller,
  lockCallerManagement,
  updateCallerAtVersion,
  type CallerFields,
  type StoredCaller,
} from '../../auth/callers.repository.js';

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

export async function getCaller(db: Executor, id: number): Promise<CallerView> {
  return presentCaller(await findStoredCaller(db, id));
}

export async function listCallers(db: Executor, query: ListQuery) {
  const page = await findCallers(db, query);
  return { rows: page.rows.map(presentCaller), nextAfter: page.nextAfter };
}

export async function createCaller(trx: Trx, input: CallerInput): Promise<CallerView> {
  const fields = checkedFields(input);
  const caller = presentCaller(
    await withNameUniqueness(fields.name, () => insertCaller(trx, { ...fields, now: nowTimestamp() })),
  );
  await recordEvent(trx, 'caller.created', callerPath(caller.id), caller);
  return caller;
}

/** JSON Merge Patch of name, role and grants; the last caller that can manage callers cannot stop being one. */
export async function patchCaller(
  trx: Trx,
  id: number,
  patch: CallerPatch,
  condition: VersionCondition,
): Promise<CallerView> {
  await lockCallerManagement(trx);
  return withRowLocked(
    trx,
    { table: 'callers', id },
    async () => {
      const stored = await findStoredCaller(trx, id);
      assertCondition(condition, stored.version, `Caller ${id}`);
      const current = presentCaller(stored);
      // scopes is what role and grants add up to: it may be echoed as read, in any order.
      const scopesDiffer = patch.scopes !== undefined && !sameMembers(patch.scopes, current.scopes);
      assertReadOnlyEchoes(stored, patch, scopesDiffer ? ['scopes'] : []);
      const fields = checkedFields({
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
      });
      // Only an admin manages callers: changing any other caller cannot end that.
      if (stored.role === 'admin') {
        const removed = parseScopeList(fields.removed_scopes);
        await assertManagementSurvives(trx, { callerId: id, role: fields.role, removed }, () =>
          fields.role !== 'admin'
            ? `Caller ${id} is the last caller that can manage callers; demoting it to ${fields.role} would leave nobody able to.`
            : `Removing ${CALLER_MANAGEMENT_CORE.filter((scope) => removed.includes(scope)).join(' and ')} from caller ${id} would leave no caller that can manage callers (that takes callers:read and callers:update).`,
        );
      }
      const unchanged = (Object.keys(fields) as (keyof typeof fields)[]).every(
        (field) => fields[field] === stored[field],
      );
      if (unchanged) return written(current);
      const updated = await withNameUniqueness(fields.name, () =>
        updateCallerAtVersion(trx, id, stored.version, { ...fields, now: nowTimestamp() }),
      );
      if (!updated) return VERSION_MOVED;
      const caller = presentCaller(updated);
      await recordEvent(trx, 'caller.updated', callerPath(id), caller);
      return written(caller);
    },
    `Caller ${id}`,
  );
}

/** Deleting a caller deletes its keys; its audit events stay, naming it. */
export async function deleteCaller(trx: Trx, id: number, condition: VersionCondition): Promise<void> {
  await lockCallerManagement(trx);
  await withRowLocked(
    trx,
    { table: 'callers', id },
    async () => {
      const stored = await findStoredCaller(trx, id);
      assertCondition(condition, stored.version, `Caller ${id}`);
      if (stored.role === 'admin') {
        await assertManagementSurvives(
          trx,
          { callerId: id, deleted: true },
          () => `Caller ${id} is the last caller that can manage callers; deleting it would leave nobody able to.`,
        );
      }
      if (!(await deleteAtVersion(trx, 'callers', id, stored.version))) return VERSION_MOVED;
      await recordEvent(trx, 'caller.deleted', callerPath(id), { id });
      return DELETED;
    },
    `Caller ${id}`,
  );
}

export const callerPath = (id: number) => `/v1/callers/${id}`;

function sameMembers(echoed: readonly string[], stored: readonly string[]): boolean {
  const set = new Set(echoed);
  return set.size === stored.length && stored.every((scope) => set.has(scope));
}

export async function findStoredCaller(db: Executor, id: number): Promise<StoredCaller> {
  const caller = await findCallerById(db, id);
  if (!caller) throw new NotFoundError(`There is no caller ${id}.`);
  return caller;
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

async function withNameUniqueness<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isUniqueViolation(error, 'callers.name')) {
      throw new ConflictError('caller-name-taken', `Another caller is already named ${name}.`, {
        conflicting_field: 'name',
      });
    }
    throw error;
  }
}
