import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Type, { type Static, type TObject, type TSchema } from 'typebox';
import { recordInTransaction, type AuditRecord } from '../../audit-trail/audit-log.js';
import { challenge } from '../../auth/challenge.js';
import type { RequestContext } from '../../auth/context.js';
import type { Action, Scope } from '../../auth/policy.js';
import type { Trx } from '../../db/database.js';
import { AppError, ForbiddenError, type FieldError } from '../../errors.js';
import { etagFor, ifMatchAllows } from '../../http/etag.js';
import { IdempotencyHeaders, runIdempotent } from '../../http/idempotency.js';
import { PROBLEM_TYPE_BASE, toAppError } from '../../http/problem.js';
import type { VersionCondition } from '../../http/records.js';
import { IF_MATCH_PATTERN, RESPONSE_HEADERS, operation, representation } from '../../http/schemas.js';
import { spendMore } from '../../rate-limits/rate-limit.js';
import type { Budget } from '../../rate-limits/rate-limiter.js';
import { BatchInvalidError, BATCH_KEYS, countEntries, duplicateErrors, nestedErrors } from './checks.js';

/**
 * Atomic batches (docs/bulk.md "Batches"): `POST /v1/<collection>/batch` with
 * `{"create": [...], "replace": [...], "change": [...], "delete": [...]}` (stock: `set`,
 * `adjust`) runs every entry in ONE unit of work, through the same service function as the
 * single request it stands for, so an entry behaves exactly like that request: its events,
 * stock movements, audit record and the Idempotency-Key's record commit together, or nothing of
 * the batch is stored. Members run in the order the collection declares them (create, replace,
 * change, delete), each array in its order; the answer has a result per entry, in the same shape.
 * The first entry that fails ends the batch: the transaction is rolled back and one problem
 * names the entry by JSON Pointer (batch-entry-refused 422, batch-entry-conflict 409).
 */

/** What one entry did: its status, the record's address and ETag, and the record (none after a delete). */
export interface EntryResult {
  status: number;
  location: string;
  version?: number;
  record?: unknown;
}

/**
 * One member of a batch (`create`, `set` …): what an entry looks like and what running it does.
 * `targets` and `run` are methods so that members of different entry schemas share one list
 * (BatchSpec.actions): the batch's body schema is built from each member's `entry`, so what they
 * are handed is what that schema validated.
 */
export interface BatchAction<Entry extends TSchema = TSchema> {
  member: string;
  /** The scope an entry needs, beyond the route's own: `<collection>:<action>` (or stock:update). */
  action: Action;
  /** The single request an entry stands for, as its audit record names it. */
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  entry: Entry;
  /** The records an entry names (`id:5`, `email:…`): two entries naming one record are refused. */
  targets?(entry: Static<Entry>): string[];
  run(trx: Trx, entry: Static<Entry>, context: RequestContext): Promise<EntryResult>;
}

export interface BatchSpec {
  /** `/v1/users`: the batch lives at `${path}/batch`. */
  path: string;
  /** The scopes' resource (users → users:create …) and the operation's tag. */
  resource: string;
  /** `User` in the operation's id (batchUsers) and its schemas' titles (UserBatch). */
  singular: string;
  /** The record an entry answers with. */
  record: TSchema;
  /** What the route needs before any entry (the scope of changing the collection). */
  permission: Scope;
  /** Members in the order they run. */
  actions: BatchAction[];
  /** A tighter rate-limit budget each create entry spends from too (orders-create); other entries spend none of it. */
  rateLimitBudget?: Budget;
  /** What the description adds (what the entries of this collection can do). */
  description: string;
}

/** The largest ROWI_BATCH_MAX allows; arrays are bounded by it in the schema, the setting decides. */
const ENTRIES_BOUND = 10_000;

/** The condition of an entry's `if_match`, as If-Match on the single request. */
export const IfMatchMember = Type.String({
  maxLength: 512,
  pattern: IF_MATCH_PATTERN,
  description: 'the ETag the entry is conditional on, as If-Match on the single request (stale: 409, nothing stored)',
});

export const conditionOfEntry =
  (entry: { if_match?: string }): VersionCondition =>
  (version) =>
    ifMatchAllows(entry.if_match, version);

/** An entry that names its record by `id` and may carry `if_match`, with the fields of `body` (a PUT or PATCH body). */
export function targetedEntry(body: TObject | undefined, title: string) {
  const { id: _echoed, ...fields } = body?.properties ?? {};
  return Type.Object(
    {
      id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'the record this entry changes' }),
      if_match: Type.Optional(IfMatchMember),
      ...fields,
    },
    { additionalProperties: false, title },
  );
}

/** The single request's body, from an entry: without `if_match`. */
export function bodyOf<T extends { if_match?: string }>(entry: T): Omit<T, 'if_match'> {
  const { if_match: _condition, ...body } = entry;
  return body;
}

/** The result of a write that answers the record (create, replace, change, set). */
export function recordResult(
  status: number,
  location: string,
  record: { version: number },
  shown = record,
): EntryResult {
  return { status, location, version: record.version, record: shown };
}

function resultSchema(record: TSchema) {
  return Type.Object(
    {
      status: Type.Integer({ minimum: 200, maximum: 299, description: 'what the single request would have answered' }),
      location: Type.String({ description: "the record's path" }),
      etag: Type.Optional(Type.String({ description: "the record's ETag, for a later If-Match" })),
      record: Type.Optional(record),
    },
    { additionalProperties: false },
  );
}

export function batchOperation(app: FastifyInstance, spec: BatchSpec): void {
  const { db, config } = app;
  const result = resultSchema(spec.record);
  const body = Type.Object(
    Object.fromEntries(
      spec.actions.map((action) => [
        action.member,
        Type.Optional(Type.Array(action.entry, { maxItems: ENTRIES_BOUND })),
      ]),
    ),
    { additionalProperties: false, title: `${spec.singular}Batch` },
  );
  const answer = Type.Object(
    Object.fromEntries(
      spec.actions.map((action) => [action.member, Type.Optional(Type.Array(result, { maxItems: ENTRIES_BOUND }))]),
    ),
    { additionalProperties: false, title: `${spec.singular}BatchResult` },
  );
  const members = spec.actions.map((action) => `\`${action.member}\``).join(', ');
  app.post(
    `${spec.path}/batch`,
    {
      schema: operation({
        operationId: `batch${spec.singular}s`,
        permission: spec.permission,
        summary: `Run many writes of ${spec.resource} in one request, all or nothing`,
        description: `Members ${members}, run in that order, each array in its order, in one transaction: every entry behaves as its single request, and either all are stored or none. 200 with a result per entry (status, location, etag, record) in the same shape. The first entry that fails rolls the batch back: 422 batch-entry-refused or 409 batch-entry-conflict, whose errors point at the entry (#/create/3/sku) and whose failed_entry is the single request's problem. Each entry needs the scope of its action; at most ROWI_BATCH_MAX entries (413 batch-too-large); one rate-limit unit per entry; an Idempotency-Key covers the whole batch. ${spec.description}`,
        tags: [spec.resource],
        headers: IdempotencyHeaders,
        body,
        consumes: ['application/json'],
        response: {
          200: representation(answer, 'Every entry done, a result each, in request order', RESPONSE_HEADERS.replayed, [
            'json',
          ]),
        },
        problems: [409],
      }),
      // Before the schema's validation: a batch over the limit is refused without validating
      // thousands of entries, and a batch inside an entry is named as such, not as unknown fields.
      preValidation: async (request) => {
        const count = countEntries(request.body, BATCH_KEYS);
        if (count > config.batchMax) throw tooLarge(count, config.batchMax);
        const nested = nestedErrors(
          request.body,
          spec.actions.map((action) => action.member),
        );
        if (nested.length > 0) throw new BatchInvalidError('Batches do not nest: an entry holds a batch.', nested);
      },
    },
    async (request, reply) => {
      const batch = request.body as Record<string, unknown[] | undefined>;
      const present = spec.actions.filter((action) => (batch[action.member]?.length ?? 0) > 0);
      const count = present.reduce((sum, action) => sum + batch[action.member]!.length, 0);
      if (count === 0)
        throw new BatchInvalidError(`The batch holds no entry; give at least one in ${members}.`, [
          { in: 'body', pointer: '#', detail: 'holds no entry' },
        ]);
      const context = request.context!;
      assertMayRun(context, spec, present);
      const duplicates = duplicateErrors(
        present.map((action) => ({ member: action.member, entries: batch[action.member]!, targets: action.targets })),
      );
      if (duplicates.length > 0)
        throw new BatchInvalidError('Entries name one record more than once; give each record one entry.', duplicates);
      const creates = present.find((action) => action.method === 'POST');
      // The budget its creates spend besides (orders-create): one unit an order placed, none without.
      const budgetUnits = creates === undefined ? 0 : batch[creates.member]!.length;
      await spendMore(
        request,
        reply,
        count - 1,
        spec.rateLimitBudget === undefined ? undefined : { name: spec.rateLimitBudget, units: budgetUnits },
      );
      const done = await runIdempotent(db, request, context.idempotency, async (trx) => {
        const results: Record<string, unknown[]> = {};
        const audit: AuditRecord[] = [];
        for (const action of present) {
          const entries = batch[action.member]!;
          const answered: unknown[] = (results[action.member] = []);
          for (let index = 0; index < entries.length; index++) {
            let outcome: EntryResult;
            try {
              outcome = await action.run(trx, entries[index], context);
            } catch (error) {
              throw entryFailure(error, `#/${action.member}/${index}`, request);
            }
            answered.push({
              status: outcome.status,
              location: outcome.location,
              ...(outcome.version === undefined ? {} : { etag: etagFor(outcome.version, 'json') }),
              ...(outcome.record === undefined ? {} : { record: outcome.record }),
            });
            audit.push(auditRecordOf(context, request.ip, spec.resource, action, outcome));
          }
        }
        await recordInTransaction(trx, audit);
        return { status: 200, body: results };
      });
      return sendBatch(reply, done.body, done.replayed);
    },
  );
}

function sendBatch(reply: FastifyReply, body: unknown, replayed: boolean) {
  if (replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(200).send(body);
}

function tooLarge(count: number, max: number): AppError {
  return new AppError(
    'batch-too-large',
    `The batch holds ${count} entries; at most ${max} are allowed (ROWI_BATCH_MAX). Nothing was run; split it.`,
    { extensions: { max_entries: max, entries: count } },
  );
}

/**
 * 403 unless the caller holds the scope of each action the batch holds. The route's own (update, and
 * read of what entries name, as for a single record: auth/policy.ts permissionOf) was checked before.
 */
function assertMayRun(context: RequestContext, spec: BatchSpec, present: BatchAction[]): void {
  const { scopes, name } = context.access;
  const needed = present.map((action): Scope => `${spec.resource}:${action.action}`);
  const missing = [...new Set(needed)].filter((scope) => !scopes.has(scope));
  if (missing.length === 0) return;
  const detail = `${name} lacks ${missing.join(' and ')}, which entries of this batch need.`;
  throw new ForbiddenError(detail, missing, challenge('insufficient_scope', detail, missing.join(' ')));
}

/** The audit record of one entry: the single request it stands for, within the batch's request id. */
function auditRecordOf(
  { access, requestId }: RequestContext,
  clientIp: string,
  resource: string,
  action: BatchAction,
  outcome: EntryResult,
): AuditRecord {
  return {
    at: Date.now(),
    request_id: requestId,
    caller_id: access.callerId,
    caller_name: access.name,
    credential: access.credential,
    user_id: access.userId,
    method: action.method,
    path: outcome.location,
    resource,
    record_id: outcome.location.split('/')[3] ?? null,
    action: action.action,
    status: outcome.status,
    duration_ms: 0,
    client_ip: clientIp,
  };
}

/** Entry statuses that are the entry's fault (its rules or the stored state), answered as the batch's 422 or 409. */
const REFUSED = new Set([404, 422]);
const CONFLICT = new Set([409, 412]);

/**
 * What a failing entry makes of the batch: its own problem, pointed at the entry, inside the
 * batch's 422 or 409. Anything else (403 for a reference the caller may not read, a database that
 * cannot answer) is the batch's own problem, its pointers moved under the entry.
 */
function entryFailure(error: unknown, pointer: string, request: FastifyRequest): unknown {
  const known = error instanceof AppError ? error : toAppError(error as never, request);
  if (known === undefined) return error;
  const errors: FieldError[] = known.errors?.map((field) => ({
    ...field,
    pointer: `${pointer}${field.pointer.replace(/^#/, '')}`,
  })) ?? [
    {
      in: 'body',
      pointer:
        typeof known.extensions?.conflicting_field === 'string'
          ? `${pointer}/${known.extensions.conflicting_field}`
          : pointer,
      detail: known.message,
    },
  ];
  if (!REFUSED.has(known.status) && !CONFLICT.has(known.status)) {
    return new AppError(known.type, known.message, {
      errors,
      ...(known.extensions ? { extensions: known.extensions } : {}),
      ...(known.headers ? { headers: known.headers } : {}),
    });
  }
  const type = CONFLICT.has(known.status) ? 'batch-entry-conflict' : 'batch-entry-refused';
  return new AppError(type, `Entry ${pointer.slice(1)} failed, so nothing of the batch was stored: ${known.message}`, {
    errors,
    extensions: {
      failed_entry: {
        pointer,
        type: `${PROBLEM_TYPE_BASE}${known.type}`,
        title: known.title,
        status: known.status,
        detail: known.message,
        ...known.extensions,
      },
    },
  });
}
