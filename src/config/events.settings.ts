import Type from 'typebox';
import { setting } from './serving.settings.js';

/** The settings of events: how long the outbox keeps them, the live stream, webhooks and the NATS bus. */
export const EVENT_SETTINGS = {
  eventsRetention: setting(
    Type.Integer({
      minimum: 60,
      maximum: 31_536_000,
      default: 2_592_000,
      description:
        'seconds events (and webhook deliveries) are kept before they are pruned in the background; a stream resumes from any event still kept (30 days by default)',
    }),
    'ROWI_EVENTS_RETENTION',
  ),
  eventsHeartbeat: setting(
    Type.Integer({
      minimum: 1,
      maximum: 300,
      default: 15,
      description: 'seconds between the comments an idle event stream sends to keep its connection open',
    }),
    'ROWI_EVENTS_HEARTBEAT',
  ),
  eventsMaxStreams: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 5,
      description: 'event streams one caller may hold open at once on one process (429 beyond)',
    }),
    'ROWI_EVENTS_MAX_STREAMS',
  ),
  eventsStreamBuffer: setting(
    Type.Integer({
      minimum: 16_384,
      maximum: 67_108_864,
      default: 262_144,
      description:
        'bytes of events one stream may hold unsent (beyond the socket buffers of the operating system); past it the stream waits for its client, the events waiting in the outbox, and a client that takes nothing for two `ROWI_EVENTS_HEARTBEAT` intervals is disconnected (256 KiB by default)',
    }),
    'ROWI_EVENTS_STREAM_BUFFER',
  ),
  webhookRetrySchedule: setting(
    Type.String({
      default: '5,300,1800,7200,18000,36000,36000',
      pattern: '^\\d{1,6}(\\.\\d{1,3})?(,\\d{1,6}(\\.\\d{1,3})?){0,19}$',
      'x-error': 'must be 1 to 20 comma-separated numbers of seconds',
      description:
        'seconds to wait before each retry of a failed webhook delivery (±20 % jitter); after the last, the delivery is dead-lettered',
    }),
    'ROWI_WEBHOOK_RETRY_SCHEDULE',
  ),
  webhookTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 60_000,
      default: 10_000,
      description:
        'milliseconds one webhook delivery attempt may take (connecting, sending, the answer) before it fails',
    }),
    'ROWI_WEBHOOK_TIMEOUT',
  ),
  webhookConcurrency: setting(
    Type.Integer({
      minimum: 1,
      maximum: 256,
      default: 16,
      description:
        'webhook deliveries one endpoint may have in flight at once, each of a different resource (the events of one resource go one at a time, in order)',
    }),
    'ROWI_WEBHOOK_CONCURRENCY',
  ),
  webhookThread: setting(
    Type.Union([Type.Literal('thread'), Type.Literal('main')], {
      default: 'thread',
      description:
        "`thread`: webhooks are delivered from a thread of their own, in the process that sends them, while an endpoint is enabled (about 38 MB more memory there; on SQLite, more of the requests' rate under webhook volume: docs/events.md); `main`: from the event loop that answers requests",
    }),
    'ROWI_WEBHOOK_THREAD',
  ),
  webhookDisableAfter: setting(
    Type.Integer({
      minimum: 1,
      maximum: 10_000,
      default: 24,
      description:
        'failed delivery attempts in a row after which an endpoint is disabled and its pending deliveries dead-lettered (a success resets the count)',
    }),
    'ROWI_WEBHOOK_DISABLE_AFTER',
  ),
  webhookSecretOverlap: setting(
    Type.Integer({
      minimum: 0,
      maximum: 604_800,
      default: 86_400,
      description: 'seconds a rotated webhook secret keeps signing beside the new one',
    }),
    'ROWI_WEBHOOK_SECRET_OVERLAP',
  ),
  webhookAllowHosts: setting(
    Type.String({
      default: '',
      pattern: '^$|^[A-Za-z0-9.:/_-]+(,[A-Za-z0-9.:/_-]+)*$',
      'x-error': 'must be a comma-separated list of host names, IP addresses and CIDR ranges',
      description:
        'comma-separated host names, IP addresses and CIDR ranges webhooks may be sent to although they are private, loopback or link-local; they may use `http://`',
    }),
    'ROWI_WEBHOOK_ALLOW_HOSTS',
  ),
  natsUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^(nats|tls)://\\S+$',
      'x-error': 'must be a nats:// or tls:// URL',
      description:
        '`nats://host:4222`: every committed event is also published to NATS JetStream (subject `rowi.events.<type>`); unset: off',
      'x-secret': true,
    }),
    'ROWI_NATS_URL',
  ),
  natsSubject: setting(
    Type.String({
      default: 'rowi.events',
      pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+){0,7}$',
      'x-error': 'must be dot-separated tokens of letters, digits, _ or -',
      description: 'the subjects events are published on: `<this>.<type>` (`rowi.events.order.created`)',
    }),
    'ROWI_NATS_SUBJECT',
  ),
  natsStream: setting(
    Type.String({
      default: 'ROWI_EVENTS',
      pattern: '^[A-Za-z0-9_-]{1,64}$',
      'x-error': 'must be 1 to 64 letters, digits, _ or -',
      description: 'JetStream stream that holds the subjects `<ROWI_NATS_SUBJECT>.>` (made when missing)',
    }),
    'ROWI_NATS_STREAM',
  ),
};
