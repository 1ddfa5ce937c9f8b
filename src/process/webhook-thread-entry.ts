import { parentPort, workerData } from 'node:worker_threads';
import { eventSightOfOwner } from '../auth/visibility.js';
import { openStorage } from '../db/connect.js';
import { shareWriteLockReleases } from '../db/sqlite-lock.js';
import type { Wakes } from '../outbox/outbox-worker.js';
import { webhookOptions } from '../outbox/readers.js';
import { AddressPolicy } from '../outbox/ssrf.js';
import { WebhookDispatcher } from '../outbox/webhook-dispatcher.js';
import { createLogger } from '../observability/logger.js';
import type { WebhookThreadData } from './webhook-thread.js';

/** PostgreSQL connections the thread keeps at most, beside the process's pool: it reads the endpoints side by side. */
const THREAD_POOL_SIZE = 4;

// The webhook thread (webhook-thread.ts): the dispatcher on a database connection of its own,
// woken by the main thread's messages, until it is told to close.
const { config, userAgent, owner, lockReleases } = workerData as WebhookThreadData;
shareWriteLockReleases(lockReleases);
const log = createLogger(config).child({ thread: 'webhooks' });
const storage = await openStorage(
  {
    ...config,
    databasePoolSize: Math.min(config.databasePoolSize, THREAD_POOL_SIZE),
    // Its SQLite commits do not wait for the disk while holding the write lock the requests need:
    // what it writes (deliveries fanned out with their cursor, claims, outcomes) is on disk with the
    // main thread's next commit, and if a power cut loses it first, it is done and sent again (at
    // least once, with the same sequence).
    sqliteSynchronous: 'normal',
  },
  log,
  // The main thread checkpoints the file, and wakes this thread on the signals of other instances.
  { checkpoints: false, signals: false },
);
const listeners = new Set<() => void>();
const wakes: Wakes = {
  onWake(listener) {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
};
const dispatcher = new WebhookDispatcher(
  storage.db,
  wakes,
  log,
  webhookOptions({
    config,
    policy: new AddressPolicy(config.webhookAllowHosts),
    userAgent,
    readableBy: eventSightOfOwner,
    owner,
  }),
);
dispatcher.start();
parentPort!.on('message', (message: unknown) => {
  if (message === 'wake') for (const listener of listeners) listener();
  else if (message === 'close')
    void (async () => {
      await dispatcher.close();
      await storage.close();
      log.flush();
      parentPort!.close();
    })();
});
