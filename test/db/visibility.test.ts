import { describe, expect, it } from 'vitest';
import { SEES_ALL, eventVisible, narrowerEventSight, type EventSight } from '../../src/db/visibility.js';

/**
 * A Sight with both an owner and a user (a token acting for a user, whose caller sees only its own
 * records: docs/access.md) shows only what both show, in the events it filters and when an open
 * stream's sight narrows.
 */
const event = (created_by: number | null, user_id: number | null) => ({ resource: 'orders', created_by, user_id });

describe('eventVisible', () => {
  it('eventVisible: only the events of records that are both the owner’s and the user’s, when a sight names both', () => {
    const sight: EventSight = new Map([['orders', { owner: 3, user: 7 }]]);
    expect([event(3, 7), event(3, 8), event(4, 7), event(null, 7)].map((shown) => eventVisible(sight, shown))).toEqual([
      true,
      false,
      false,
      false,
    ]);
  });

  it('eventVisible: every event of the resource when the sight sees all, none of a resource it does not name', () => {
    expect(eventVisible(new Map([['orders', SEES_ALL]]), event(null, null))).toBe(true);
    expect(eventVisible(new Map([['users', SEES_ALL]]), event(3, 7))).toBe(false);
  });
});

describe('narrowerEventSight', () => {
  it('narrowerEventSight: the limits of both, when one limits by owner and the other by user', () => {
    const narrowed = narrowerEventSight(
      new Map([['orders', { owner: null, user: 7 }]]),
      new Map([['orders', { owner: 3, user: null }]]),
    );
    expect([...narrowed]).toEqual([['orders', { owner: 3, user: 7 }]]);
  });

  it('narrowerEventSight: nothing of a resource when the two name different users or owners, or the later drops it', () => {
    const current: EventSight = new Map([
      ['orders', { owner: 3, user: 7 }],
      ['users', { owner: 3, user: null }],
      ['items', SEES_ALL],
    ]);
    const now: EventSight = new Map([
      ['orders', { owner: 3, user: 8 }],
      ['users', { owner: 4, user: null }],
    ]);
    expect([...narrowerEventSight(current, now)]).toEqual([]);
  });

  it('narrowerEventSight: the later limits when the earlier saw all, the same when nothing changed', () => {
    const limited = { owner: 3, user: 7 };
    expect([...narrowerEventSight(new Map([['orders', SEES_ALL]]), new Map([['orders', limited]]))]).toEqual([
      ['orders', limited],
    ]);
    expect([...narrowerEventSight(new Map([['orders', limited]]), new Map([['orders', SEES_ALL]]))]).toEqual([
      ['orders', limited],
    ]);
  });
});
