import type { FastifyBaseLogger } from 'fastify';
import { nowTimestamp } from '../db/clock.js';
import type { Trx } from '../db/database.js';
import { deadLetterPending, insertAttempt, updateDelivery, type StoredDelivery } from './deliveries.repository.js';
import { countEndpointFailure, disableEndpoint, resetEndpointFailures } from './webhook-endpoints.repository.js';
import { ownerGone } from './webhook-owners.js';
import type { AttemptOutcome } from './webhook-sender.js';

/**
 * What became of one delivery's turn:
 * - sent: POSTed (or refused by the URL policy before it was): a failure is retried on the
 *   schedule and counts towards disabling the endpoint;
 * - gone: its event is no longer kept; dead at once;
 * - skipped: the endpoint's owner may not read the event (now); dead at once, not the receiver's
 *   failure, and the endpoint's next deliveries go on;
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

export interface OutcomeRules {
  /** Seconds before each retry; after the last, a delivery is dead-lettered. */
  retrySchedule: readonly number[];
  /** Failed attempts in a row that disable an endpoint. */
  disableAfter: number;
}

const JITTER = 0.2;

/** An attempt that was not made, and why. */
export function notSent(error: string): AttemptOutcome {
  return { ok: false, statusCode: null, durationMs: 0, error };
}

/** Whether the endpoint's next deliveries may be sent after this one in the same batch (an endpoint gets its events in order). */
export function goesOn(turn: Turn): boolean {
  return turn.outcome.ok || turn.kind === 'skipped';
}

/** Records the turn as an attempt of the delivery, and what follows from it for the delivery and its endpoint. */
export async function recordTurn(
  trx: Trx,
  endpointId: number,
  turn: Turn,
  rules: OutcomeRules,
  log: FastifyBaseLogger,
): Promise<void> {
  const { delivery, outcome } = turn;
  const now = nowTimestamp();
  await insertAttempt(trx, {
    delivery_id: delivery.id,
    attempted_at: turn.attemptedAt,
    status_code: outcome.statusCode,
    duration_ms: outcome.durationMs,
    error: outcome.error,
  });
  const attempts = delivery.attempts + 1;
  if (outcome.ok) {
    await updateDelivery(trx, delivery.id, { status: 'succeeded', attempts, next_attempt_at: null }, now);
    await resetEndpointFailures(trx, endpointId);
    return;
  }
  const dead = turn.kind !== 'sent' || attempts > rules.retrySchedule.length;
  const delay = dead ? 0 : rules.retrySchedule[attempts - 1]! * 1000 * (1 - JITTER + Math.random() * 2 * JITTER);
  await updateDelivery(
    trx,
    delivery.id,
    {
      status: dead ? 'dead' : 'pending',
      attempts,
      next_attempt_at: dead ? null : new Date(Date.now() + delay).toISOString(),
    },
    now,
  );
  if (turn.kind === 'ownerless') {
    await disableOwnerless(trx, endpointId, turn.ownerId, log);
    return;
  }
  if (turn.kind === 'skipped') return;
  if ((await countEndpointFailure(trx, endpointId)) >= rules.disableAfter) {
    await disableEndpoint(
      trx,
      endpointId,
      `disabled after ${rules.disableAfter} failed attempts in a row (the last: ${outcome.error})`,
      now,
    );
    await deadLetterPending(trx, endpointId, now);
    log.warn({ endpoint_id: endpointId }, 'webhook endpoint disabled: it kept failing');
  }
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
