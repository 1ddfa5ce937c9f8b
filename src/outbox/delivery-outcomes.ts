import type { FastifyBaseLogger } from 'fastify';
import { nowTimestamp } from '../db/clock.js';
import type { Trx } from '../db/database.js';
import {
  deadLetterPending,
  existingDeliveries,
  holdBackResource,
  insertAttempts,
  markSucceeded,
  updateDelivery,
  type StoredDelivery,
} from './deliveries.repository.js';
import { addEndpointFailures, disableEndpoint, resetEndpointFailures } from './webhook-endpoints.repository.js';
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

/**
 * Records turns (of any endpoints, in the order they ended) in the unit of work given: every
 * attempt in one statement, the succeeded deliveries in one more, each other outcome on its own
 * (failures are the exception). A failed delivery holds back the later deliveries of its
 * resource until its next attempt (or lets them go when it went dead); an endpoint's failures in
 * a row are counted, a success resetting them, and `disableAfter` of them disable it. Answers
 * the endpoints disabled.
 */
export async function recordTurns(
  trx: Trx,
  ended: readonly SettledTurn[],
  rules: OutcomeRules,
  log: FastifyBaseLogger,
): Promise<number[]> {
  // A delivery deleted meanwhile (with its endpoint) has nothing left to record.
  const kept = new Set(
    await existingDeliveries(
      trx,
      ended.map((turn) => turn.delivery.id),
    ),
  );
  const turns = ended.filter((turn) => kept.has(turn.delivery.id));
  if (turns.length === 0) return [];
  const now = nowTimestamp();
  await insertAttempts(
    trx,
    turns.map((turn) => ({
      delivery_id: turn.delivery.id,
      attempted_at: turn.attemptedAt,
      status_code: turn.outcome.statusCode,
      duration_ms: turn.outcome.durationMs,
      error: turn.outcome.error,
    })),
  );
  await markSucceeded(
    trx,
    turns.filter((turn) => turn.status === 'succeeded').map((turn) => turn.delivery.id),
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
