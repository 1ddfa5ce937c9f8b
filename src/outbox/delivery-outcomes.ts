import type { FastifyBaseLogger } from 'fastify';
import { nowTimestamp } from '../db/clock.js';
import type { Executor, Trx } from '../db/database.js';
import {
  deadLetterPending,
  insertDeliveries,
  existingDeliveries,
  holdBack,
  holdBackResource,
  insertAttempts,
  markSucceeded,
  updateDelivery,
  type NewDelivery,
  type StoredDelivery,
} from './deliveries.repository.js';
import {
  addEndpointFailures,
  disableEndpoint,
  findEndpointStates,
  resetEndpointFailures,
} from './webhook-endpoints.repository.js';
import { ownerGone } from './webhook-owners.js';
import type { AttemptOutcome } from './webhook-sender.js';

/**
 * What became of one delivery's turn:
 * - sent: POSTed (or refused by the URL policy before it was): a failure is retried on the
 *   schedule and counts towards disabling the endpoint;
 * - gone: its event is no longer kept; dead at once;
 * - skipped: the endpoint's owner may not read the event (now); dead at once, not the receiver's
 *   failure, and the next deliveries of its resource go on;
 * - ownerless: the endpoint's owner no longer exists; the endpoint is disabled and every pending
 *   delivery of it goes dead.
 */
export interface Turn {
  delivery: StoredDelivery;
  kind: 'sent' | 'gone' | 'skipped' | 'ownerless';
  outcome: AttemptOutcome;
  attemptedAt: string;
  /** The endpoint's owner, as the delivery found it (for the reason an ownerless endpoint is disabled). */
  ownerId: number | null;
}

/** A turn and what it makes of its delivery: decided when the turn ends, written later with others (recordTurns). */
export interface SettledTurn extends Turn {
  status: 'succeeded' | 'pending' | 'dead';
  /** When a delivery that stays pending is tried again (the later deliveries of its resource wait until then). */
  nextAttemptAt: string | null;
}

export interface OutcomeRules {
  /** Seconds before each retry; after the last, a delivery is dead-lettered. */
  retrySchedule: readonly number[];
  /** Failed attempts in a row that disable an endpoint. */
  disableAfter: number;
}

const JITTER = 0.2;

/** Parses ROWI_WEBHOOK_RETRY_SCHEDULE. */
export function retrySchedule(text: string): number[] {
  return text.split(',').map(Number);
}

/** An attempt that was not made, and why. */
export function notSent(error: string): AttemptOutcome {
  return { ok: false, statusCode: null, durationMs: 0, error };
}

/** Whether the next delivery of the same resource may be sent after this one (the events of a resource go in order). */
export function goesOn(turn: Turn): boolean {
  return turn.outcome.ok || turn.kind === 'skipped';
}

/** What the turn makes of its delivery: succeeded, pending until its next attempt on the schedule (±20 %), or dead. */
export function settleTurn(turn: Turn, rules: OutcomeRules): SettledTurn {
  if (turn.outcome.ok) return { ...turn, status: 'succeeded', nextAttemptAt: null };
  const attempts = turn.delivery.attempts + 1;
  if (turn.kind !== 'sent' || attempts > rules.retrySchedule.length)
    return { ...turn, status: 'dead', nextAttemptAt: null };
  const delay = rules.retrySchedule[attempts - 1]! * 1000 * (1 - JITTER + Math.random() * 2 * JITTER);
  return { ...turn, status: 'pending', nextAttemptAt: new Date(Date.now() + delay).toISOString() };
}

/** The deliveries held in memory that a write of outcomes may have to write (webhook-memory.ts). */
export interface UnwrittenDeliveries {
  /** A delivery in memory, by its temporary id. */
  get(id: number): StoredDelivery | undefined;
  /** The deliveries let go behind a failed delivery (by its id), held back when its outcome is written. */
  behindOf(id: number): number[];
}

/** What a write of outcomes reads first, outside its transaction: the endpoints that still exist (and whether each is enabled), the deliveries that do. */
export interface FoundBeforeWrite {
  endpoints: Map<number, boolean>;
  kept: Set<number>;
}

/** Reads what recordTurns needs to know of these turns and deliveries let go before it writes. */
export async function findBeforeWrite(
  db: Executor,
  ended: readonly SettledTurn[],
  release: readonly number[],
  memory: UnwrittenDeliveries,
): Promise<FoundBeforeWrite> {
  const released = release.flatMap((id) => (id > 0 ? [] : (memory.get(id) ?? [])));
  const endpoints = await findEndpointStates(db, [
    ...new Set([
      ...ended.map((turn) => turn.delivery.endpoint_id),
      ...released.map((delivery) => delivery.endpoint_id),
    ]),
  ]);
  // A delivery deleted meanwhile (with its endpoint) has nothing left to record.
  const kept = new Set(
    await existingDeliveries(
      db,
      ended.flatMap((turn) => (turn.delivery.id > 0 ? [turn.delivery.id] : [])),
    ),
  );
  return { endpoints, kept };
}

/**
 * Records turns (of any endpoints, in the order they ended) in the unit of work given, with the
 * deliveries let go unsent (`release`). A delivery that was held in memory gets its row now, as its
 * outcome left it: a success is that one row, its attempt in it; a failure adds its attempt. One
 * that was a row already gets its attempt and its new status (the succeeded ones in one statement,
 * failures on their own: they are the exception). A failed delivery holds back the later
 * deliveries of its resource until its next attempt (or lets them go when it went dead); an
 * endpoint's failures in a row are counted, a success resetting them, and `disableAfter` of them
 * disable it. Answers the endpoints disabled, and the temporary ids of the deliveries in memory
 * that are now written (or dropped: their endpoint is gone).
 */
export async function recordTurns(
  trx: Trx,
  ended: readonly SettledTurn[],
  release: readonly number[],
  memory: UnwrittenDeliveries,
  found: FoundBeforeWrite,
  rules: OutcomeRules,
  log: FastifyBaseLogger,
): Promise<{ disabled: number[]; fromMemory: number[] }> {
  const now = nowTimestamp();
  const fromMemory: number[] = [];
  const isRow = (id: number) => id > 0;
  const released = release.flatMap((id) => (isRow(id) ? [] : (memory.get(id) ?? [])));
  const { endpoints, kept } = found;
  const rows: { temporary: number; row: NewDelivery }[] = [];
  const write = (delivery: StoredDelivery, changes: Partial<NewDelivery>) => {
    fromMemory.push(delivery.id);
    const enabled = endpoints.get(delivery.endpoint_id);
    if (enabled === undefined) return;
    const { id: _temporary, ...row } = delivery;
    // Its endpoint disabled meanwhile: what would wait goes dead, as its other pending deliveries did.
    const status = !enabled && (changes.status ?? 'pending') === 'pending' ? 'dead' : (changes.status ?? 'pending');
    rows.push({
      temporary: delivery.id,
      row: {
        ...row,
        ...changes,
        status,
        next_attempt_at: status === 'pending' ? (changes.next_attempt_at ?? now) : null,
        updated_at: now,
      },
    });
  };
  const turns: SettledTurn[] = [];
  for (const turn of ended) {
    // Held in memory before this process lost the dispatcher (and took it again): its new holder sends it.
    if (!isRow(turn.delivery.id) && memory.get(turn.delivery.id) === undefined) continue;
    if (isRow(turn.delivery.id)) {
      if (kept.has(turn.delivery.id)) turns.push(turn);
    } else if (endpoints.has(turn.delivery.endpoint_id)) turns.push(turn);
    if (!isRow(turn.delivery.id))
      write(turn.delivery, {
        status: turn.status,
        attempts: 1,
        next_attempt_at: turn.nextAttemptAt,
        ...(turn.outcome.ok
          ? {
              succeeded_at: turn.attemptedAt,
              success_status_code: turn.outcome.statusCode,
              success_duration_ms: turn.outcome.durationMs,
            }
          : {}),
      });
    if (goesOn(turn)) continue;
    // The later deliveries of its resource let go in memory follow it, due at its next attempt.
    for (const id of memory.behindOf(turn.delivery.id)) {
      const behind = isRow(id) ? undefined : memory.get(id);
      if (behind) write(behind, { next_attempt_at: turn.nextAttemptAt ?? now });
      // A row chained behind one that was in memory (made before it, read again): held back by its id.
      else if (!isRow(turn.delivery.id)) await holdBack(trx, [id], turn.nextAttemptAt ?? now);
    }
  }
  for (const delivery of released)
    if (endpoints.get(delivery.endpoint_id)) write(delivery, {});
    else fromMemory.push(delivery.id);
  const stored = await insertDeliveries(
    trx,
    rows.map(({ row }) => row),
  );
  const idOf = new Map(rows.map(({ temporary }, index) => [temporary, stored[index]!.id]));
  const recorded = turns.map((turn) =>
    isRow(turn.delivery.id) ? turn : { ...turn, delivery: { ...turn.delivery, id: idOf.get(turn.delivery.id)! } },
  );
  const disabled = await recordAttempts(
    trx,
    recorded,
    new Set(turns.filter((turn) => isRow(turn.delivery.id)).map((turn) => turn.delivery.id)),
    rules,
    log,
    now,
  );
  return { disabled, fromMemory };
}

/** The attempts of recorded turns, their deliveries' statuses (those that were rows before: `wereRows`), what they hold back, and their endpoints' failures. */
async function recordAttempts(
  trx: Trx,
  turns: readonly SettledTurn[],
  wereRows: Set<number>,
  rules: OutcomeRules,
  log: FastifyBaseLogger,
  now: string,
): Promise<number[]> {
  if (turns.length === 0) return [];
  await insertAttempts(
    trx,
    turns
      // A success written from memory keeps its attempt in its row.
      .filter((turn) => wereRows.has(turn.delivery.id) || !turn.outcome.ok)
      .map((turn) => ({
        delivery_id: turn.delivery.id,
        attempted_at: turn.attemptedAt,
        status_code: turn.outcome.statusCode,
        duration_ms: turn.outcome.durationMs,
        error: turn.outcome.error,
      })),
  );
  await markSucceeded(
    trx,
    turns
      .filter((turn) => turn.status === 'succeeded' && wereRows.has(turn.delivery.id))
      .map((turn) => turn.delivery.id),
    now,
  );
  // Per endpoint: failures since its last success in these turns, and whether there was one.
  const failures = new Map<number, { reset: boolean; count: number; last: string | null; ownerless?: number | null }>();
  for (const turn of turns) {
    const endpointId = turn.delivery.endpoint_id;
    const counted = failures.get(endpointId) ?? { reset: false, count: 0, last: null };
    failures.set(endpointId, counted);
    if (turn.status === 'succeeded') {
      counted.reset = true;
      counted.count = 0;
      continue;
    }
    const { delivery } = turn;
    // Still pending: a delivery dead-lettered while its attempt was in flight (its endpoint disabled) stays dead.
    if (wereRows.has(delivery.id))
      await updateDelivery(
        trx,
        delivery.id,
        { status: turn.status, attempts: delivery.attempts + 1, next_attempt_at: turn.nextAttemptAt },
        now,
        'pending',
      );
    if (turn.kind !== 'skipped' && delivery.resource_key !== null)
      await holdBackResource(trx, endpointId, delivery.resource_key, delivery.id, turn.nextAttemptAt ?? now);
    if (turn.kind === 'ownerless') counted.ownerless = turn.ownerId;
    else if (turn.kind === 'sent') {
      counted.count++;
      counted.last = turn.outcome.error;
    }
  }
  const disabled: number[] = [];
  for (const [endpointId, counted] of failures) {
    if (counted.ownerless !== undefined) {
      await disableOwnerless(trx, endpointId, counted.ownerless, log);
      disabled.push(endpointId);
      continue;
    }
    if (counted.reset) await resetEndpointFailures(trx, endpointId);
    if (counted.count === 0) continue;
    if ((await addEndpointFailures(trx, endpointId, counted.count)) >= rules.disableAfter) {
      await disableEndpoint(
        trx,
        endpointId,
        `disabled after ${rules.disableAfter} failed attempts in a row (the last: ${counted.last})`,
        now,
      );
      await deadLetterPending(trx, endpointId, now);
      log.warn({ endpoint_id: endpointId }, 'webhook endpoint disabled: it kept failing');
      disabled.push(endpointId);
    }
  }
  return disabled;
}

/** Disables an endpoint whose owner no longer exists; its pending deliveries go dead. */
export async function disableOwnerless(
  trx: Trx,
  endpointId: number,
  ownerId: number | null,
  log: FastifyBaseLogger,
): Promise<void> {
  const now = nowTimestamp();
  await disableEndpoint(trx, endpointId, ownerGone(ownerId), now);
  await deadLetterPending(trx, endpointId, now);
  log.warn(
    { endpoint_id: endpointId, owner_caller_id: ownerId },
    'webhook endpoint disabled: its owner no longer exists',
  );
}
