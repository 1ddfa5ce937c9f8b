import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { MemoryStore, RedisStore, type Store } from '../../src/rate-limits/rate-limit-stores.js';

/** A take of several units at once (a batch spends one per entry), in memory and in Redis alike. */
const REDIS_URL = process.env.ROWI_TEST_REDIS_URL || undefined;
const WINDOW_MS = 60_000;

async function spendInUnits(store: Store) {
  const key = randomUUID();
  return [
    await store.take(key, 10, WINDOW_MS, 4),
    await store.take(key, 10, WINDOW_MS, 7),
    await store.take(key, 10, WINDOW_MS, 6),
    await store.take(key, 10, WINDOW_MS),
  ].map((decision) => [decision.allowed, decision.remaining]);
}

describe('rate-limit stores: several units in one take', () => {
  it('MemoryStore: 4 of 10 leave 6; 7 more are refused and spend nothing; 6 then fit, leaving none', async () => {
    expect(await spendInUnits(new MemoryStore())).toEqual([
      [true, 6],
      [false, 0],
      [true, 0],
      [false, 0],
    ]);
  });

  it.skipIf(REDIS_URL === undefined)('RedisStore: the same, counted by the script in Redis', async () => {
    const fallback = new MemoryStore();
    const store = new RedisStore(REDIS_URL!, `units-${randomUUID()}`, fallback, pino({ level: 'silent' }));
    try {
      await store.connected(2000);
      expect(await spendInUnits(store)).toEqual([
        [true, 6],
        [false, 0],
        [true, 0],
        [false, 0],
      ]);
      expect(store.degradedSince).toBeUndefined();
    } finally {
      await store.close();
    }
  });
});
