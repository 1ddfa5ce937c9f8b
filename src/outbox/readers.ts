import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import type { Commits } from '../db/commits.js';
import type { Db } from '../db/database.js';
import type { Signals } from '../db/signals.js';
import { EventFeed } from './feed.js';
import { leaseHolderName } from './lease.js';
import { AddressPolicy } from './ssrf.js';
import type { ReadableBy } from './webhook-owners.js';
import { retrySchedule, WebhookDispatcher, type WebhookOptions } from './webhooks.js';

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
   * Starts webhook delivery elsewhere, woken by this process's feed (a thread of its own:
   * process/webhook-thread.ts); answers undefined when it cannot, and delivery runs here.
   */
  dispatchElsewhere?: (feed: EventFeed) => { close(): Promise<void> } | undefined;
}

/** Settings and collaborators of webhook delivery, wherever it runs. */
export interface DispatcherSettings {
  config: Config;
  policy: AddressPolicy;
  userAgent: string;
  readableBy: ReadableBy;
}

/** What the webhook dispatcher is told, from the settings. */
export function webhookOptions({ config, policy, userAgent, readableBy }: DispatcherSettings): WebhookOptions {
  return {
    retrySchedule: retrySchedule(config.webhookRetrySchedule),
    timeoutMs: config.webhookTimeout,
    concurrency: config.webhookConcurrency,
    disableAfter: config.webhookDisableAfter,
    policy,
    userAgent,
    owner: leaseHolderName(),
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
  let dispatcher = dispatchElsewhere?.(feed);
  if (dispatcher === undefined) {
    const here = new WebhookDispatcher(db, feed, log, webhookOptions({ config, policy, userAgent, readableBy }));
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
