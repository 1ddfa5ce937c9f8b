import { describe, expect, it } from 'vitest';
import type { NewDelivery } from '../../src/outbox/deliveries.repository.js';
import { START } from '../../src/outbox/outbox.repository.js';
import { newDelivery } from '../../src/outbox/webhook-deliveries.js';
import { DeliveriesInMemory } from '../../src/outbox/webhook-memory.js';

/** The deliveries held in memory and their numbering per resource (webhook-memory.ts): pure, no database. */

const NOW = '2026-01-01T00:00:00.000Z';
let events = 0;
const deliveryOfUser = (userId: number): NewDelivery =>
  newDelivery(1, { id: `evt_${++events}`, type: 'user.updated', path: `/v1/users/${userId}` }, NOW);
const at = (seq: number) => ({ txid: 0, seq });

/**
 * A user's delivery held in memory by one fan-out, and the next fan-out's delivery of that user
 * numbered, during which the first's outcome is written (with its row).
 */
function outcomeWrittenWhileNumbering(userId: number) {
  const memory = new DeliveriesInMemory();
  memory.startAt(START);
  const first = deliveryOfUser(userId);
  memory.number([first]);
  const [kept] = memory.fannedOut(at(1), START, [first]);
  expect(memory.holds(1, first.resource_key!)).toBe(true);
  // The next fan-out numbers the resource from memory…
  const second = deliveryOfUser(userId);
  expect(memory.unknownSequences(1, [second.resource_key!])).toEqual([]);
  memory.number([second]);
  // …while the first's outcome is written, before that fan-out says what it keeps.
  memory.written([kept!.id], at(1));
  return { memory, first, second };
}

describe('deliveries in memory', () => {
  it("when a resource's delivery in memory has its outcome written while the next fan-out numbers that resource, then the delivery that fan-out keeps still counts: the one after it is numbered next, without reading the rows", () => {
    const { memory, first, second } = outcomeWrittenWhileNumbering(7);
    memory.fannedOut(at(2), at(1), [second]);

    expect([first.sequence, second.sequence]).toEqual([1, 2]);
    expect(memory.holds(1, second.resource_key!)).toBe(true);
    const third = deliveryOfUser(7);
    expect(memory.unknownSequences(1, [third.resource_key!])).toEqual([]);
    memory.number([third]);
    expect(third.sequence).toBe(3);
  });

  it("when a fan-out sends a resource's delivery through the table instead, then the count is forgotten once it ends: the next is numbered from the rows", () => {
    const { memory, second } = outcomeWrittenWhileNumbering(8);
    // Written as a row by the fan-out (not kept): its number is in the rows now.
    memory.fannedOut(at(2), at(2), []);
    expect(memory.holds(1, second.resource_key!)).toBe(false);
    expect(memory.unknownSequences(1, [second.resource_key!])).toEqual([second.resource_key]);
  });
});
