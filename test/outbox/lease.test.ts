import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diedOnThisHost, Lease, leaseHolderName } from '../../src/outbox/lease.js';
import { startApp, type TestApp } from '../helpers/app.js';

/** The pid of a process of this host that has ended (a child run to its end). */
const endedPid = (): number => {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
};
const holder = (host: string, pid: number) => `${host}:${pid}:0a1b2c3d`;

describe("the outbox consumers' lease (webhooks, NATS): taken over at once from a process of this host that died", () => {
  it('diedOnThisHost: true only for a process of this host that has ended', () => {
    expect(diedOnThisHost(holder(hostname(), endedPid()))).toBe(true);
    // Alive: the test runner's parent, and this process itself (another app in it may hold it).
    expect(diedOnThisHost(holder(hostname(), process.ppid))).toBe(false);
    expect(diedOnThisHost(holder(hostname(), process.pid))).toBe(false);
    expect(diedOnThisHost(leaseHolderName())).toBe(false);
    expect(leaseHolderName()).toMatch(new RegExp(`^${hostname().replaceAll('.', '\\.')}:${process.pid}:[0-9a-f]{8}$`));
    // Another host: nothing is known of its processes.
    expect(diedOnThisHost(holder(`not-${hostname()}`, endedPid()))).toBe(false);
    expect(diedOnThisHost('no pid here')).toBe(false);
  });

  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(() => test.close());

  it('a lease held by a running process is not taken before it runs out; one held by a process that died is taken at once, and its claims handed to onTakeOver', async () => {
    const taken: string[] = [];
    const mine = new Lease(
      test.storage.db,
      'lease-test',
      holder(hostname(), process.pid),
      15_000,
      async (_trx, previous) => void taken.push(previous),
    );

    const alive = holder(hostname(), process.ppid);
    expect(await new Lease(test.storage.db, 'lease-test', alive, 15_000).held()).toBe(true);
    expect(await mine.held()).toBe(false);
    expect(taken).toEqual([]);

    // The holder's lease is taken by a process that then dies (its name is that of an ended pid).
    const dead = holder(hostname(), endedPid());
    const other = new Lease(test.storage.db, 'lease-test-2', dead, 15_000);
    expect(await other.held()).toBe(true);
    const successor = new Lease(
      test.storage.db,
      'lease-test-2',
      holder(hostname(), process.pid),
      15_000,
      async (_trx, previous) => void taken.push(previous),
    );
    expect(await successor.held()).toBe(true);
    expect(taken).toEqual([dead]);
    // The dead holder's name no longer holds it.
    expect(await new Lease(test.storage.db, 'lease-test-2', dead, 15_000).held()).toBe(false);
  });
});
