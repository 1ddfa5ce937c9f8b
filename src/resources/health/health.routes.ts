import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { LogLevel } from 'fastify';
import { pingDatabase } from './health.repository.js';
import Type from 'typebox';
import { AppError } from '../../errors.js';
import { pendingMigrations } from '../../db/migrate.js';
import { operation, representation } from '../../http/schemas.js';
import type { UpstreamWeather } from '../../upstream/upstream-weather.js';
import type { AuditTrailState } from '../../audit-trail/audit-log.js';

/** A readiness check that has not answered by then counts as failed: a probe must not hang. */
const CHECK_TIMEOUT_MS = 2000;

const CheckSchema = Type.Object(
  {
    status: Type.Union([Type.Literal('pass'), Type.Literal('warn'), Type.Literal('fail')], {
      description: 'warn: serving, in a degraded way',
    }),
    duration_ms: Type.Number(),
    output: Type.Optional(Type.String({ description: 'why the check failed' })),
  },
  { additionalProperties: false, xml: { name: 'check' } },
);

const HealthSchema = Type.Object(
  {
    status: Type.Literal('pass'),
    version: Type.String(),
    checks: Type.Optional(
      Type.Object(
        {
          database: CheckSchema,
          migrations: CheckSchema,
          rate_limits: Type.Optional(CheckSchema),
          audit_trail: Type.Optional(CheckSchema),
          weather_provider: Type.Optional(CheckSchema),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, title: 'Health', xml: { name: 'health' } },
);

type Check = { status: 'pass' | 'warn' | 'fail'; duration_ms: number; output?: string };

/**
 * Probes for load balancers and orchestrators, outside /v1 and without credentials: live says
 * the process answers; ready says it can serve the API (its database answers and has every
 * migration this version needs). While the instance shuts down both answer 503, so traffic moves
 * away before the process ends. Probes are not callers' requests: they are neither in the audit
 * trail nor in the info-level access log.
 */
const healthRoutes: FastifyPluginAsyncTypebox<{ version: string; auditTrail: () => AuditTrailState }> = async (
  app,
  { version, auditTrail },
) => {
  // Quieter than the API, never louder: warn, unless the service logs even less.
  const quiet: LogLevel = (['error', 'fatal', 'silent'] as const).find((level) => level === app.log.level) ?? 'warn';
  const probe = { logLevel: quiet, config: { probe: true } };

  app.get(
    '/health/live',
    {
      ...probe,
      schema: operation({
        operationId: 'getLiveness',
        permission: 'public',
        omitProblems: [429],
        summary: 'Liveness: the process is up and answers',
        description:
          'For a process supervisor: 200 while the process answers at all, whatever the state of the database. Public, never rate-limited, not in the audit trail; 503 once the process drains.',
        tags: ['service'],
        response: { 200: representation(HealthSchema, 'The process answers') },
      }),
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return { status: 'pass' as const, version };
    },
  );

  app.get(
    '/health/ready',
    {
      ...probe,
      schema: operation({
        operationId: 'getReadiness',
        permission: 'public',
        omitProblems: [429],
        summary: 'Readiness: the database answers and is migrated; 503 problem otherwise',
        description:
          "For a load balancer: 200 while this instance can serve the API (its database answers and is migrated), else a 503 problem without the database's error text; also 503 while it drains. Public, never rate-limited, not in the audit trail.",
        tags: ['service'],
        problems: [503],
        response: { 200: representation(HealthSchema, 'Ready to serve the API') },
      }),
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      const database = await timed('the database did not answer', async () => {
        if (app.storage.corruption.found !== undefined) throw new CheckFailed(DAMAGED);
        await pingDatabase(app.db);
      });
      const migrations = await timed('the migrations could not be read', async () => {
        const pending = await pendingMigrations(app.db);
        if (pending.length > 0) throw new CheckFailed(`migrations not applied yet: ${pending.join(', ')}`);
      });
      // Damage was logged once when found, with what to do; a probe every few seconds adds nothing.
      // A database that cannot be reached is said once an outage (db/outage.ts), not once a probe.
      for (const check of [database, migrations])
        if (check.error && check.check.output !== DAMAGED)
          app.db.outage.failed(app.log, 'readiness', check.error, `readiness check failed: ${check.check.output}`);
      const checks = {
        database: database.check,
        migrations: migrations.check,
        ...rateLimitCheck(app.rateLimiter?.sharing),
        ...auditTrailCheck(auditTrail()),
        ...weatherProviderCheck(app.weather),
      };
      if (database.check.status === 'fail' || migrations.check.status === 'fail') {
        throw new AppError('service-unavailable', 'This rowi instance cannot serve the API now: see checks.', {
          headers: { 'retry-after': '5', 'cache-control': 'no-store' },
          extensions: { checks },
        });
      }
      return { status: 'pass' as const, version, checks };
    },
  );
};

/**
 * With ROWI_REDIS_URL: whether the rate-limit counters are shared. Redis unreachable is a warning,
 * not a failure: the instance still serves, counting alone (docs/limits.md).
 */
function rateLimitCheck(sharing: string | undefined): { rate_limits?: Check } {
  if (sharing === undefined || sharing === 'instance') return {};
  return sharing === 'redis'
    ? { rate_limits: { status: 'pass', duration_ms: 0 } }
    : {
        rate_limits: {
          status: 'warn',
          duration_ms: 0,
          output: 'Redis cannot be reached: this instance counts rate limits alone',
        },
      };
}

/**
 * Only while the audit trail cannot be written: a warning, not a failure. Every instance on the
 * database fails alike then (it is unreachable, or its disk full), and requests are still served
 * and their events kept in memory until it takes them (docs/guide.md "Health probes").
 */
function auditTrailCheck({ pending, failingSince }: AuditTrailState): { audit_trail?: Check } {
  if (failingSince === undefined) return {};
  const seconds = Math.round((Date.now() - failingSince) / 1000);
  return {
    audit_trail: {
      status: 'warn',
      duration_ms: 0,
      output: `the audit trail could not be written for ${seconds} s; ${pending} events wait in memory`,
    },
  };
}

/**
 * With ROWI_WEATHER_PROVIDER: whether rowi is calling the provider. An open circuit breaker is a
 * warning, not a failure: reads get stale weather or 502 from every instance alike, so taking
 * this one out of the load balancer would not help.
 */
function weatherProviderCheck(weather: UpstreamWeather | undefined): { weather_provider?: Check } {
  if (weather === undefined) return {};
  const state = weather.breakerState();
  return state === 'closed'
    ? { weather_provider: { status: 'pass', duration_ms: 0 } }
    : {
        weather_provider: {
          status: 'warn',
          duration_ms: 0,
          output: `${weather.source} failed repeatedly: its circuit breaker is ${state}`,
        },
      };
}

const DAMAGED = 'the database is damaged (the log says where, and what to do)';

/** A failure whose message may be shown to anyone (the probe needs no credentials). */
class CheckFailed extends Error {}

/**
 * Runs one check within CHECK_TIMEOUT_MS; a failure is reported, never thrown. Its output says
 * what failed in general terms (the probe is public); the error itself goes to the log.
 */
async function timed(failure: string, check: () => Promise<void>): Promise<{ check: Check; error?: unknown }> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new CheckFailed(`${failure} within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return { check: { status: 'pass', duration_ms: elapsed(started) } };
  } catch (error) {
    const output = error instanceof CheckFailed ? error.message : failure;
    return { check: { status: 'fail', duration_ms: elapsed(started), output }, error };
  } finally {
    clearTimeout(timer);
  }
}

const elapsed = (started: number) => Math.round((performance.now() - started) * 100) / 100;

export default healthRoutes;
