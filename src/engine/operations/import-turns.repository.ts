import { sql } from 'kysely';
import type { Executor, Trx } from '../../db/database.js';

/**
 * The queries of the import queue as a whole (docs/bulk.md "Queue and turns"): what each caller has
 * waiting and running, whose turn is next, and how much the waiting files hold. Counted in the
 * database, so that every process (each --workers worker, each instance) sees the same queue.
 *
 * A caller is its caller id; the subject of an external issuer's token, which has none, is its name.
 */
export interface ImportCaller {
  callerId: number | null;
  /** The external subject's name when callerId is null; null otherwise. */
  subject: string | null;
}

/** One caller's place in the queue: what it runs, its oldest waiting import, and the oldest of those `holder` holds. */
export interface ImportTurn extends ImportCaller {
  running: number;
  /** Its oldest queued import, wherever its file is; null when none waits. */
  oldestQueued: number | null;
  /** Its oldest queued import whose file this process holds; null when none. */
  held: number | null;
}

const SUBJECT = sql<string | null>`case when created_by is null then caller_name end`;

const numberOrNull = (value: unknown) => (value === null || value === undefined ? null : Number(value));

/** Whether `holder` holds any queued import (a hint, read before the claim's lock: most polls end here). */
export async function holdsQueuedImport(db: Executor, holder: string): Promise<boolean> {
  const row = await db
    .selectFrom('operations')
    .select('id')
    .where('status', '=', 'queued')
    .where('kind', '=', 'import')
    .where('holder', '=', holder)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Every caller with an import queued or running: one row each (bounded by the callers, not their files). */
export async function findImportTurns(trx: Trx, holder: string): Promise<ImportTurn[]> {
  const rows = await trx
    .selectFrom('operations')
    .select((eb) => [
      'created_by',
      SUBJECT.as('subject'),
      eb.fn
        .sum<number | string>(eb.case().when('status', '=', 'running').then(eb.lit(1)).else(eb.lit(0)).end())
        .as('running'),
      eb.fn
        .min<number | string | null>(eb.case().when('status', '=', 'queued').then(eb.ref('id')).end())
        .as('oldest_queued'),
      eb.fn
        .min<number | string | null>(
          eb
            .case()
            .when(eb.and([eb('status', '=', 'queued'), eb('holder', '=', holder)]))
            .then(eb.ref('id'))
            .end(),
        )
        .as('held'),
    ])
    .where('kind', '=', 'import')
    .where('status', 'in', ['queued', 'running'])
    .groupBy(['created_by', SUBJECT])
    .execute();
  return rows.map((row) => ({
    callerId: numberOrNull(row.created_by),
    subject: row.subject,
    running: Number(row.running),
    oldestQueued: numberOrNull(row.oldest_queued),
    held: numberOrNull(row.held),
  }));
}

/** When each of the callers last had an import started (ISO text), for the round robin; absent: never. */
export async function findLastStarts(trx: Trx, callers: readonly ImportCaller[]): Promise<Map<string, string>> {
  const ids = callers.flatMap((caller) => (caller.callerId === null ? [] : [caller.callerId]));
  const subjects = callers.flatMap((caller) =>
    caller.callerId === null && caller.subject !== null ? [caller.subject] : [],
  );
  if (ids.length === 0 && subjects.length === 0) return new Map();
  const rows = await trx
    .selectFrom('operations')
    .select((eb) => ['created_by', SUBJECT.as('subject'), eb.fn.max<string>('started_at').as('last_started')])
    .where('kind', '=', 'import')
    .where('started_at', 'is not', null)
    .where((eb) =>
      eb.or([
        ...(ids.length === 0 ? [] : [eb('created_by', 'in', ids)]),
        ...(subjects.length === 0 ? [] : [eb.and([eb('created_by', 'is', null), eb('caller_name', 'in', subjects)])]),
      ]),
    )
    .groupBy(['created_by', SUBJECT])
    .execute();
  return new Map(
    rows.map((row) => [callerKey({ callerId: numberOrNull(row.created_by), subject: row.subject }), row.last_started]),
  );
}

/** A caller as one text, for maps. */
export const callerKey = (caller: ImportCaller) =>
  caller.callerId === null ? `subject:${caller.subject ?? ''}` : `caller:${caller.callerId}`;

export interface QueueMeasure {
  /** The caller's imports waiting (queued), and the bytes of their files. */
  queued: number;
  queuedBytes: number;
  /** The bytes of every file waiting for or in its import, whoever uploaded it. */
  spooledBytes: number;
}

/** What the caller has waiting, and what every waiting or running import's file holds. */
export async function measureImportQueue(db: Executor, caller: ImportCaller): Promise<QueueMeasure> {
  const own = await db
    .selectFrom('operations')
    .select((eb) => [
      eb.fn.countAll<number | string>().as('queued'),
      eb.fn.sum<number | string | null>('bytes_total').as('bytes'),
    ])
    .where('kind', '=', 'import')
    .where('status', '=', 'queued')
    .where((eb) =>
      caller.callerId === null
        ? eb.and([eb('created_by', 'is', null), eb('caller_name', '=', caller.subject ?? '')])
        : eb('created_by', '=', caller.callerId),
    )
    .executeTakeFirstOrThrow();
  const all = await db
    .selectFrom('operations')
    .select((eb) => eb.fn.sum<number | string | null>('bytes_total').as('bytes'))
    .where('kind', '=', 'import')
    .where('status', 'in', ['queued', 'running'])
    .executeTakeFirstOrThrow();
  return { queued: Number(own.queued), queuedBytes: Number(own.bytes ?? 0), spooledBytes: Number(all.bytes ?? 0) };
}
