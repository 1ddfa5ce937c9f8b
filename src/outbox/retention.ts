import type { RetainedTable } from '../db/retention.js';
import { deleteDeliveriesBefore, deleteIdleSequences } from './deliveries.repository.js';
import { firstEventIdAt, timeOfEventId } from './event-ids.js';
import { deleteEventsBefore } from './outbox.repository.js';

/**
 * The tables of events kept for ROWI_EVENTS_RETENTION (pruned by db/retention.ts): the outbox,
 * and the webhook deliveries made from it, whose attempts go with them (a foreign key with
 * ON DELETE CASCADE), so webhook_attempts is only measured; and the numbering of each resource's
 * deliveries, once none of them is kept.
 */
export function eventTables(retentionSeconds: number): RetainedTable[] {
  return [
    {
      table: 'events',
      key: 'seq',
      // No created_at: an event's id begins with its time.
      oldestBy: 'id',
      time: 'id',
      timeOf: timeOfEventId,
      retentionSeconds,
      prune: (trx, cutoff, limit) => deleteEventsBefore(trx, firstEventIdAt(cutoff), limit),
    },
    {
      table: 'webhook_deliveries',
      key: 'id',
      oldestBy: 'created_at',
      time: 'created_at',
      retentionSeconds,
      prune: deleteDeliveriesBefore,
    },
    { table: 'webhook_attempts', key: 'id', time: 'attempted_at', retentionSeconds },
    // After the deliveries (the sweep goes in this order): a resource's numbering goes once none of its deliveries is kept.
    {
      table: 'webhook_sequences',
      retentionSeconds,
      prune: (trx, _cutoff, limit) => deleteIdleSequences(trx, limit),
    },
  ];
}
