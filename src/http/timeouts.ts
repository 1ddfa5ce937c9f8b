import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { AppError } from '../errors.js';
import { isProbe } from './probes.js';
import { sendProblem, writeProblemToSocket } from './problem.js';

/**
 * Every phase of a connection has a bound, so that no client, slow or hostile, holds a socket
 * (and what the request has allocated) for longer than it takes to serve it:
 *
 * - headers (ROWI_HEADERS_TIMEOUT, 10 s): request line and headers, from their first byte. The
 *   slowloris bound; a real client sends them in one packet.
 * - request (ROWI_REQUEST_TIMEOUT, 30 s): the whole request, body included: 1 MiB (the body
 *   limit) arrives in time at 35 KB/s.
 * - handler (ROWI_HANDLER_TIMEOUT, 15 s): from the request received to the response; past it
 *   rowi answers 503 (registerHandlerTimeout).
 * - idle: a socket on which no byte moves in either direction for longer than the request or
 *   the handler may take, plus a grace, is destroyed. It ends a response a client never reads;
 *   it never cuts a request the two bounds above still allow, so their 408 or 503 is answered.
 * - keep-alive (ROWI_KEEP_ALIVE_TIMEOUT, 72 s): an idle connection between requests. Longer than
 *   the idle time-out of the load balancers in front (60 s on most), so that they close first:
 *   a balancer that reuses a connection rowi has just closed answers its caller 502.
 *
 * Node checks the header and request bounds on a timer of its own, every 30 s unless told
 * otherwise, which would stretch a 10 s bound to 40 s: here every second.
 */
export interface ServerTimeouts {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  /** Fastify's name for the idle (socket) time-out. */
  connectionTimeout: number;
  connectionsCheckingInterval: number;
}

const CONNECTIONS_CHECKING_INTERVAL_MS = 1000;
const IDLE_GRACE_MS = 5000;

export function serverTimeouts(
  config: Pick<Config, 'headersTimeout' | 'requestTimeout' | 'keepAliveTimeout' | 'handlerTimeout'>,
): ServerTimeouts {
  // Node refuses a header bound past the request bound, which includes the headers.
  if (config.headersTimeout > config.requestTimeout) {
    throw new ConfigError(
      `ROWI_HEADERS_TIMEOUT=${config.headersTimeout} is not a valid setting: it must not exceed ROWI_REQUEST_TIMEOUT (${config.requestTimeout}), which includes the headers`,
    );
  }
  return {
    headersTimeout: config.headersTimeout,
    requestTimeout: config.requestTimeout,
    keepAliveTimeout: config.keepAliveTimeout,
    connectionTimeout: Math.max(config.requestTimeout, config.handlerTimeout) + IDLE_GRACE_MS,
    connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
  };
}

/**
 * Seconds a caller is asked to wait after an overrun: the work may still be running, and a POST
 * retried with the same Idempotency-Key then replays its outcome instead of queueing behind it.
 */
const OVERRUN_RETRY_AFTER_S = 5;

/**
 * A request not answered within ROWI_HANDLER_TIMEOUT is answered with a 503 problem and
 * Retry-After, so a stuck handler (a lock, a slow database) never holds its caller without an
 * answer. The budget counts from the request's arrival and starts again once its body is in:
 * a slow upload is the client's doing, bounded by ROWI_REQUEST_TIMEOUT (408), never answered
 * as the server's 503.
 *
 * The handler itself is not stopped: its work may still finish after the 503. A write is one
 * transaction, so it is committed whole or not at all, never half; the caller cannot tell which,
 * and retries with the same Idempotency-Key to find out (it replays the outcome once there is one).
 */
export function registerHandlerTimeout(app: FastifyInstance, config: Pick<Config, 'handlerTimeout'>): void {
  const budgets = new Budgets(config.handlerTimeout);
  app.addHook('onRequest', (request, reply, done) => {
    if (!isProbe(request)) budgets.start(request, reply);
    done();
  });
  // Runs once the body is parsed (or at once when there is none).
  app.addHook('preValidation', (request, reply, done) => {
    if (!reply.sent && !isProbe(request)) budgets.start(request, reply);
    done();
  });
  app.addHook('onResponse', (request, _reply, done) => {
    budgets.stop(request);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    budgets.stop(request);
    done();
  });
  app.addHook('onClose', async () => budgets.close());
}

/**
 * The requests in flight with the time their budget ends, in that order (every budget is as long,
 * and one started again goes to the end): one timer looks at the oldest a few times a budget,
 * instead of a timer set and cleared for every request. It runs only while requests are in
 * flight; a 503 comes at most a quarter of the budget (and never more than 250 ms) late.
 */
class Budgets {
  readonly #budget: number;
  readonly #period: number;
  readonly #ends = new Map<FastifyRequest, { reply: FastifyReply; end: number }>();
  #timer: NodeJS.Timeout | undefined;

  constructor(budget: number) {
    this.#budget = budget;
    this.#period = Math.max(1, Math.min(250, Math.floor(budget / 4)));
  }

  /** Starts the request's budget, or starts it again (its body is in). */
  start(request: FastifyRequest, reply: FastifyReply): void {
    this.#ends.delete(request);
    this.#ends.set(request, { reply, end: performance.now() + this.#budget });
    this.#timer ??= setInterval(() => this.#look(), this.#period).unref();
  }

  stop(request: FastifyRequest): void {
    this.#ends.delete(request);
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#ends.clear();
  }

  #look(): void {
    const now = performance.now();
    for (const [request, { reply, end }] of this.#ends) {
      if (end > now) break;
      this.#ends.delete(request);
      overrun(request, reply, this.#budget);
    }
    if (this.#ends.size === 0) this.close();
  }
}

function overrun(request: FastifyRequest, reply: FastifyReply, budget: number): void {
  if (reply.sent || reply.raw.headersSent || request.raw.socket?.destroyed === true) return;
  // Still receiving the body: the request time-out's to end, and the budget starts again after it.
  if (request.raw.complete === false) return;
  request.log.warn({ budget_ms: budget }, 'request not answered within its time budget: answered 503');
  sendProblem(
    request,
    reply,
    new AppError(
      'service-unavailable',
      `rowi did not finish this request within its time budget of ${budget} ms. It may still complete: retry after Retry-After seconds; a POST retried with the same Idempotency-Key takes effect at most once.`,
      { headers: { 'retry-after': String(OVERRUN_RETRY_AFTER_S) } },
    ),
  );
  // The handler's own answer, when it comes, is dropped quietly: Fastify sends nothing more on
  // a hijacked reply (without this it would log an "already sent" warning with a stack trace).
  reply.hijack();
}

/** Errors Node's HTTP parser meets before there is a request: problems too, and the connection closed. */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  this.log.debug({ err: error }, 'client error before a request');
  if (socket.writable) writeProblemToSocket(socket, clientError(error.code));
  socket.destroy(error);
}

function clientError(code: string | undefined): AppError {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return new AppError(
      'request-timeout',
      'The request did not arrive in time (headers or body too slow); the connection is closed.',
    );
  if (code === 'HPE_HEADER_OVERFLOW')
    return new AppError('headers-too-large', 'The request headers are too large; the connection is closed.');
  return new AppError('bad-request', 'The request could not be parsed as HTTP/1.1; the connection is closed.');
}
