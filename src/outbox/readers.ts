import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import type { Commits } from '../db/commits.js';
import type { Db } from '../db/database.js';
import type { Signals } from '../db/signals.js';
import { EventFeed } from './feed.js';
import { leaseHolderName } from './lease.js';
import { retrySchedule } from './delivery-outcomes.js';
import { AddressPolicy } from './ssrf.js';
import type { Wakes } from './outbox-worker.js';
import type { ReadableBy } from './webhook-owners.js';
import { WebhookStandby, type Dispatching } from './webhook-standby.js';
import { WebhookDispatcher, type WebhookOptions } from './webhook-dispatcher.js';

export interface EventsDependencies {
  db: Db;
  /** Told by the unit of work when a transaction that wrote events has committed: the feed wakes on it. */
  commits: Commits;
  signals: Signals;
  config: Config;
  log: FastifyBaseLogger;
  userAgent: string;
  /** What a webhook endpoint's owner may read now (auth/policy.ts, handed in by app.ts). */
  readableBy: ReadableBy;
  /**
   * Starts webhook delivery elsewhere (a thread of its own: process/webhook-thread.ts), woken by
   * this process's feed, holding the dispatcher's lease as `owner`; started only while an endpoint
   * is enabled (webhook-standby.ts). Without it, delivery runs here.
   */
  dispatchElsewhere?: ((feed: Wakes, owner: string) => Dispatching) | undefined;
}

/** Settings and collaborators of webhook delivery, wherever it runs. */
export interface DispatcherSettings {
  config: Config;
  policy: AddressPolicy;
  userAgent: string;
  readableBy: ReadableBy;
  /** This process, as the holder of the dispatcher's lease (leaseHolderName). */
  owner: string;
}

/** What the webhook dispatcher is told, from the settings. */
export function webhookOptions({ config, policy, userAgent, readableBy, owner }: DispatcherSettings): WebhookOptions {
  return {
    retrySchedule: retrySchedule(config.webhookRetrySchedule),
    timeoutMs: config.webhookTimeout,
    concurrency: config.webhookConcurrency,
    disableAfter: config.webhookDisableAfter,
    policy,
    userAgent,
    owner,
    readableBy,
  };
}

/** The event side of a process: the live feed, webhook delivery and the NATS bus, started and stopped together (pruning: retention.ts). */
export interface Events {
  feed: EventFeed;
  policy: AddressPolicy;
  close(): Promise<void>;
}

export function startEvents({
  db,
  commits,
  signals,
  config,
  log,
  userAgent,
  readableBy,
  dispatchElsewhere,
}: EventsDependencies): Events {
  const feed = new EventFeed(db, commits, signals, log);
  const policy = new AddressPolicy(config.webhookAllowHosts);
  const owner = leaseHolderName();
  let dispatcher: Dispatching;
  if (dispatchElsewhere !== undefined)
    dispatcher = new WebhookStandby(db, log, owner, () => dispatchElsewhere(feed, owner));
  else {
    const here = new WebhookDispatcher(db, feed, log, webhookOptions({ config, policy, userAgent, readableBy, owner }));
    here.start();
    dispatcher = here;
  }
  // The NATS client (about 2 MB of each process's memory) is loaded only when ROWI_NATS_URL is set;
  // the bus starts once it is (it connects in the background either way).
  const bus =
    config.natsUrl === ''
      ? undefined
      : import('./nats-bus.js').then(({ NatsBus }) => {
          const started = new NatsBus(db, feed, log, {
            url: config.natsUrl,
            stream: config.natsStream,
            subject: config.natsSubject,
            owner,
          });
          started.start();
          return started;
        });
  return {
    feed,
    policy,
    async close() {
      await Promise.all([dispatcher.close(), bus?.then((started) => started.close())]);
      feed.close();
    },
  };
}
