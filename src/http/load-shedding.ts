import underPressure from '@fastify/under-pressure';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.js';
import { AppError } from '../errors.js';
import { prepareProblem, type Problem } from './problem.js';
import { isProbe } from './probes.js';

const MIB = 1024 * 1024;

/**
 * Seconds a shed caller is asked to wait: the lag is measured over up to a second, and a backlog
 * takes a few seconds to clear; callers that come back sooner meet the same backlog.
 */
const SHED_RETRY_AFTER_S = 5;

/**
 * Load shedding (docs/limits.md: 503 when overloaded): while the event loop lags behind by more than
 * ROWI_MAX_EVENT_LOOP_DELAY ms, or the V8 heap holds more than ROWI_MAX_HEAP_USED MiB, a request
 * is answered at once with a 503 problem and Retry-After, before authentication, body or
 * database, instead of joining a queue that only grows. Either limit at 0 is off.
 *
 * The lag is the mean delay of the event loop over a sampling window of at most one second, and
 * shorter when the limit is (never under 10 ms, the plugin's resolution): a lag as long as the
 * limit is then noticed within about the limit's own time, and shedding stops one window after
 * the lag does.
 *
 * Health probes are never shed. /health/live answers while the process runs: an orchestrator
 * that restarted a process for being busy would add a cold start to the overload. /health/ready
 * keeps answering with its own checks (database, migrations), and does not turn 503 under
 * pressure: the same load reaches every instance behind a balancer, and readiness failing on all
 * of them at once would take the whole service out of rotation; shedding per request lets each
 * instance serve what it can and refuse the rest quickly.
 */
export function registerLoadShedding(
  app: FastifyInstance,
  config: Pick<Config, 'maxEventLoopDelay' | 'maxHeapUsed'>,
): void {
  if (config.maxEventLoopDelay === 0 && config.maxHeapUsed === 0) return;
  const sampleInterval = config.maxEventLoopDelay === 0 ? 1000 : Math.min(1000, Math.max(10, config.maxEventLoopDelay));
  // Building the app runs for a while without letting the event loop turn (compiling schemas,
  // migrations), which the first readings take for lag: with no sample at all in a window, the
  // plugin even reports it as infinite. Lag counts once a whole window after the start has been
  // measured; the heap is measured right from the first reading.
  let lagCountsFrom = Infinity;
  app.addHook('onReady', (done) => {
    lagCountsFrom = performance.now() + 2 * sampleInterval;
    done();
  });
  const shed = (request: FastifyRequest, reply: FastifyReply, type: string): Problem | undefined => {
    if (isProbe(request)) return undefined;
    if (type === underPressure.TYPE_EVENT_LOOP_DELAY && performance.now() < lagCountsFrom) return undefined;
    return refuse(request, reply, type);
  };
  void app.register(underPressure, {
    maxEventLoopDelay: config.maxEventLoopDelay,
    maxHeapUsedBytes: config.maxHeapUsed * MIB,
    sampleInterval,
    retryAfter: SHED_RETRY_AFTER_S,
    // The plugin sends what the handler returns and then runs no further hook; undefined lets
    // the request through. (Its types say void; its README documents the returned body.)
    pressureHandler: shed as (
      request: FastifyRequest,
      reply: FastifyReply,
      type: string,
      value: number | undefined,
    ) => void,
  });
}

function refuse(request: FastifyRequest, reply: FastifyReply, type: string): Problem {
  const cause = type === underPressure.TYPE_HEAP_USED_BYTES ? 'its memory is nearly full' : 'it is overloaded';
  // No log line per shed request: under pressure, that would add to it (the access log has them).
  return prepareProblem(
    request,
    reply,
    new AppError(
      'service-unavailable',
      `This rowi instance is refusing requests for a moment because ${cause}; retry after Retry-After seconds.`,
      {
        headers: { 'retry-after': String(SHED_RETRY_AFTER_S) },
      },
    ),
  );
}
