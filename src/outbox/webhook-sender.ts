import type { Agent, Client, Dispatcher, Pool } from 'undici';
import { storableText } from '../db/storable-text.js';
import type { AddressPolicy } from './ssrf.js';

/** What one attempt came to. */
export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

/** The receiver's answer is read up to this much, then dropped: only its status counts. */
const MAX_ANSWER_BYTES = 4096;
/**
 * Once the status and headers are in, the rest of the answer is read for at most this long: a
 * receiver that trickles its body (a byte a second) has answered all the same, and its status
 * decides at once rather than at the attempt's time-out. An answer that ends in time leaves its
 * connection for the next delivery; one that does not has it closed.
 */
const ANSWER_BODY_MS = 1000;

/**
 * A kept-alive connection left idle this long is closed by rowi: before the receiver's own idle
 * time-out (Node's 5 s, nginx's 75 s) can close it under a request rowi is starting on it. One
 * whose receiver announces its time-out (`Keep-Alive: timeout=N`) is kept at most N - 2 s (undici's
 * margin), and not kept at all when that leaves nothing.
 */
const IDLE_CONNECTION_MS = 2000;

/** URLs kept checked and parsed (WebhookSender#target). */
const MAX_TARGETS = 1000;

interface SenderOptions {
  /** Where requests may go: checked on the URL before each attempt, and on every address at each connection. */
  policy: AddressPolicy;
  /** What one attempt may take, from its start (the look-up, connecting, queueing, sending) to the answer's status. */
  timeoutMs: number;
  userAgent: string;
}

/** The attempt each request (its dispatch options) belongs to, for the connection it goes on. */
const attempts = new WeakMap<Dispatcher.DispatchOptions, Attempt>();

/**
 * One connection to a receiver, which counts the requests started on its current socket, and
 * tells an attempt that found it busy when it is free again. (undici lets a socket rest one turn
 * of the event loop after an answer, lest the receiver close it after all; the pool meanwhile
 * counts it busy, and a delivery that followed at once would open another connection.)
 */
interface ReceiverConnection {
  requestsOnSocket: number;
  whenFree(callback: () => void): void;
}

/**
 * undici's agent, loaded with the first delivery (about 4 MB a process that never sends: a worker
 * without the lease): a pool per origin of connections that count their requests.
 */
async function receiverAgent(options: SenderOptions): Promise<Agent> {
  const { Agent, Client, Pool } = await import('undici');
  class Connection extends Client implements ReceiverConnection {
    requestsOnSocket = 0;
    readonly #waiting: (() => void)[] = [];

    constructor(origin: URL, connectionOptions: Client.Options) {
      super(origin, connectionOptions);
      this.on('connect', () => (this.requestsOnSocket = 0));
      // Registered before the pool's own listener: the attempt ends as the pool takes the connection
      // back, or as the connection goes (the agent closes an origin's pool when its last socket does).
      const release = () => this.#waiting.splice(0).forEach((free) => free());
      this.on('drain', release).on('disconnect', release);
    }

    whenFree(callback: () => void): void {
      this.#waiting.push(callback);
    }

    /** false (undici's contract): busy until its 'drain', which the pool waits for before it gives it another request. */
    override dispatch(dispatchOptions: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      const attempt = attempts.get(dispatchOptions);
      attempt?.goesOn(this);
      const free = super.dispatch(dispatchOptions, handler);
      if (!free) attempt?.foundBusy();
      return free;
    }
  }
  return new Agent({
    factory: (origin, agentOptions) =>
      new Pool(origin, {
        ...(agentOptions as Pool.Options),
        factory: (poolOrigin, poolOptions) => new Connection(poolOrigin, poolOptions as Client.Options),
      }),
    connections: null,
    pipelining: 1,
    keepAliveTimeout: IDLE_CONNECTION_MS,
    keepAliveMaxTimeout: IDLE_CONNECTION_MS,
    // A connection that cannot be made within the attempt's time is given up with the attempt.
    connectTimeout: options.timeoutMs,
    // The connection goes to an address the policy checked, whatever the name resolves to later.
    connect: { lookup: options.policy.lookup },
  });
}

/**
 * POSTs deliveries over undici (Node's own HTTP client project: half the CPU of node:http per
 * delivery, measured in docs/events.md), keeping connections to receivers for the deliveries that
 * follow (no new TCP connection, or TLS handshake, each), one request at a time on each (no
 * pipelining). An origin gets as many connections as it has deliveries in flight: endpoints that
 * share a host (a SaaS's webhook intake) each keep their own slots, and one whose receiver hangs
 * does not hold the others' connections.
 */
export class WebhookSender {
  readonly #options: SenderOptions;
  #agent: Promise<Agent> | undefined;
  /**
   * Each URL as checked and parsed, by its text: the policy's verdict on a URL is the same at every
   * attempt (it is fixed for the process's life), and checking and parsing it cost more than
   * signing a delivery. The addresses a name resolves to are still checked at each connection.
   */
  readonly #targets = new Map<string, { refused: string } | { origin: string; path: string }>();

  constructor(options: SenderOptions) {
    this.#options = options;
  }

  /**
   * POSTs one delivery: a 2xx answer is a success; anything else (another status, a redirect,
   * which is never followed, a connection that fails or closes, no answer within the time-out) is
   * a failure with its reason. The URL is checked first, and the connection goes only to addresses
   * the policy allows (ssrf.ts); a URL the policy refuses is a failed attempt that says why. The
   * connection is kept for the next delivery when the answer ended within its limit. A kept
   * connection that the receiver closed just as rowi sent on it is tried once more on a new one (at
   * least once allows it).
   */
  async send(url: string, body: string, headers: Record<string, string>): Promise<AttemptOutcome> {
    // The URL as stored may have been allowed by settings this process does not have (an address
    // literal is connected to without a look-up, so the lookup's check would not see it).
    const target = this.#target(url);
    if ('refused' in target)
      return { ok: false, statusCode: null, durationMs: 0, error: `not sent: the URL ${target.refused}` };
    const request: Dispatcher.DispatchOptions = {
      origin: target.origin,
      path: target.path,
      method: 'POST',
      body,
      headers: { ...headers, 'content-type': 'application/json', 'user-agent': this.#options.userAgent },
      // The attempt's own timer bounds it from its start.
      headersTimeout: 0,
      bodyTimeout: 0,
    };
    const agent = await (this.#agent ??= receiverAgent(this.#options));
    const first = await new Attempt(agent, request, this.#options.timeoutMs).finished;
    // Options of its own, by which its connection knows the second attempt.
    return first.retry
      ? (await new Attempt(agent, { ...request }, this.#options.timeoutMs).finished).outcome
      : first.outcome;
  }

  #target(url: string): { refused: string } | { origin: string; path: string } {
    let target = this.#targets.get(url);
    if (target === undefined) {
      const refused = this.#options.policy.urlRefusal(url);
      const parsed = refused === undefined ? new URL(url) : undefined;
      target = parsed ? { origin: parsed.origin, path: parsed.pathname + parsed.search } : { refused: refused! };
      // Endpoints are few; a process that has seen many URLs (endpoints changed over months) starts again.
      if (this.#targets.size >= MAX_TARGETS) this.#targets.clear();
      this.#targets.set(url, target);
    }
    return target;
  }

  /** Closes every connection (the attempts have ended: the dispatcher waits for them first). */
  async close(): Promise<void> {
    await (await this.#agent)?.destroy();
  }
}

/** One request and what came of it: undici's handler of its events. */
class Attempt implements Dispatcher.DispatchHandler {
  readonly finished: Promise<{ outcome: AttemptOutcome; retry: boolean }>;
  readonly #started = performance.now();
  readonly #timeoutMs: number;
  readonly #timer: NodeJS.Timeout;
  #bodyTimer: NodeJS.Timeout | undefined;
  #resolve!: (result: { outcome: AttemptOutcome; retry: boolean }) => void;
  #connection: ReceiverConnection | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  /** Whether the request went on a connection that had carried one before it. */
  #reused = false;
  /** Whether its connection said it was busy when given the request: free again at its 'drain'. */
  #drainOwed = false;
  #status: number | undefined;
  #read = 0;
  #ended = false;
  #settled = false;

  constructor(agent: Agent, request: Dispatcher.DispatchOptions, timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    this.finished = new Promise((resolve) => (this.#resolve = resolve));
    // No answer at all is a failure; an answer whose body is slow counts by its status (ANSWER_BODY_MS).
    this.#timer = setTimeout(
      () => (this.#status !== undefined ? this.#answered() : this.#settle(this.#noAnswer())),
      timeoutMs,
    );
    attempts.set(request, this);
    agent.dispatch(request, this);
  }

  goesOn(connection: ReceiverConnection): void {
    this.#connection = connection;
  }

  foundBusy(): void {
    this.#drainOwed = true;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // Timed out while it waited for its connection: not sent late.
    if (this.#settled) return controller.abort(new Error('the attempt has ended'));
    this.#reused = this.#connection !== undefined && this.#connection.requestsOnSocket++ > 0;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.#status = statusCode;
    this.#bodyTimer = setTimeout(() => this.#answered(), ANSWER_BODY_MS);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#read += chunk.length;
    if (this.#read >= MAX_ANSWER_BYTES) this.#answered();
  }

  onResponseEnd(): void {
    this.#ended = true;
    // Ends when the connection is free for the delivery that may follow (or at the time-out).
    if (this.#drainOwed && this.#connection) this.#connection.whenFree(() => this.#answered());
    else this.#answered();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.#status !== undefined) return this.#answered();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'UND_ERR_CONNECT_TIMEOUT') return this.#settle(this.#noAnswer());
    const closed = closedBeforeAnswer(error);
    this.#settle(
      {
        ok: false,
        statusCode: null,
        error: closed ? 'connection closed by the receiver before it answered' : describe(error),
      },
      this.#reused && (closed || code === 'EPIPE'),
    );
  }

  #noAnswer(): Omit<AttemptOutcome, 'durationMs'> {
    return { ok: false, statusCode: null, error: `no answer within ${this.#timeoutMs} ms` };
  }

  #answered(): void {
    const status = this.#status ?? 0;
    this.#settle(
      status >= 200 && status < 300
        ? { ok: true, statusCode: status, error: null }
        : {
            ok: false,
            statusCode: status,
            error:
              status >= 300 && status < 400 ? `answered ${status} (redirects are not followed)` : `answered ${status}`,
          },
    );
  }

  #settle(outcome: Omit<AttemptOutcome, 'durationMs'>, retry = false): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#bodyTimer);
    // An answer read to its end leaves the connection to the pool, for the next delivery; any
    // other end closes it (a request still unsent is dropped when its connection comes).
    if (!this.#ended && this.#controller && !this.#controller.aborted)
      this.#controller.abort(new Error('the attempt has ended'));
    const durationMs = Math.round(performance.now() - this.#started);
    this.#resolve({ outcome: { ...outcome, durationMs }, retry });
  }
}

/** A connection the receiver closed (reset, or ended) before its answer began. */
function closedBeforeAnswer(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  // undici's SocketError: 'other side closed' (the receiver ended it), 'closed' (it went away).
  return code === 'ECONNRESET' || (code === 'UND_ERR_SOCKET' && /^(other side )?closed$/.test(error.message));
}

/** The reason an attempt failed, as stored with it: made storable, as a receiver's bytes may have shaped it. */
function describe(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND') return 'host not found';
  return storableText(error.message || String(code));
}
