import type { FastifyBaseLogger } from 'fastify';
import { faultOf } from '../../observability/logger.js';
import { authenticateAgain } from '../../auth/authenticate.js';
import { eventSightOf } from '../../auth/visibility.js';
import { FRESH_MS, type Authenticator, type Principal } from '../../auth/principals.js';
import { AppError } from '../../errors.js';
import { problemFor } from '../../http/problem.js';
import type { StreamConnection } from './stream-connection.js';

/**
 * How often every open stream's credential is checked again without being told of a change: a
 * change whose signal was lost (a listener reconnecting) still reaches every stream within
 * FRESH_MS (how long a check may believe what it last read) and this, 750 ms, inside the second
 * promised for requests.
 */
const RECHECK_MS = FRESH_MS / 2;
/** setTimeout's longest delay; a later expiry is found by the periodic checks. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

interface Checked {
  /** A check of its credential is under way. */
  running: boolean;
  /** Something changed while it ran: check again once it is done. */
  again: boolean;
  expiry: NodeJS.Timeout | undefined;
}

/**
 * Keeps open event streams within what their credential allows now, as requests are: each stream
 * is checked again, through the Authenticator, whenever callers or keys change (on this instance
 * at once, elsewhere when the signal comes), at its credential's expiry, and every RECHECK_MS.
 * While a check waits for the database, the stream takes no events; then it sends only what the
 * caller may still read (an event committed before the change but not yet sent included), or,
 * when the credential no longer authenticates or lacks events:read, ends with the 401 or 403 a
 * request would get.
 */
export class StreamAccess {
  readonly #auth: Authenticator;
  readonly #log: FastifyBaseLogger;
  readonly #streams = new Map<StreamConnection, Checked>();
  readonly #timer: NodeJS.Timeout;
  readonly #onChange = () => this.#checkAll();

  constructor(auth: Authenticator, log: FastifyBaseLogger) {
    this.#auth = auth;
    this.#log = log;
    auth.on('change', this.#onChange);
    this.#timer = setInterval(() => this.#checkAll(), RECHECK_MS);
    this.#timer.unref();
  }

  /**
   * Watches an open stream, from a first check: a change made while the stream was being opened
   * (after its request was authenticated) was not yet its to hear.
   */
  add(stream: StreamConnection): void {
    const checked: Checked = { running: false, again: false, expiry: undefined };
    this.#streams.set(stream, checked);
    this.#check(stream, checked);
  }

  delete(stream: StreamConnection): void {
    clearTimeout(this.#streams.get(stream)?.expiry);
    this.#streams.delete(stream);
  }

  close(): void {
    this.#auth.off('change', this.#onChange);
    clearInterval(this.#timer);
    for (const checked of this.#streams.values()) clearTimeout(checked.expiry);
  }

  #checkAll(): void {
    for (const [stream, checked] of this.#streams) this.#check(stream, checked);
  }

  #check(stream: StreamConnection, checked: Checked): void {
    if (stream.ended) return;
    if (checked.running) {
      checked.again = true;
      return;
    }
    let principal: Principal | Promise<Principal>;
    try {
      principal = authenticateAgain(this.#auth, stream.request);
    } catch (error) {
      this.#refuse(stream, error);
      return;
    }
    if (!(principal instanceof Promise)) {
      this.#allow(stream, checked, principal);
      return;
    }
    // Asked of the database: until the answer, the stream takes nothing (what comes meanwhile
    // waits in the outbox, and is judged by the answer).
    stream.hold();
    checked.running = true;
    principal.then(
      (resolved) => {
        checked.running = false;
        if (!checked.again) return this.#allow(stream, checked, resolved);
        checked.again = false;
        this.#check(stream, checked);
      },
      (error: unknown) => {
        checked.running = false;
        this.#refuse(stream, error);
      },
    );
  }

  #allow(stream: StreamConnection, checked: Checked, principal: Principal): void {
    stream.release(eventSightOf(principal));
    this.#watchExpiry(stream, checked, principal);
  }

  #watchExpiry(stream: StreamConnection, checked: Checked, principal: Principal): void {
    clearTimeout(checked.expiry);
    const delay = principal.expiresAt - Date.now();
    if (stream.ended || delay > LONGEST_TIMER_MS) return;
    checked.expiry = setTimeout(() => this.#check(stream, checked), Math.max(0, delay));
    checked.expiry.unref();
  }

  #refuse(stream: StreamConnection, error: unknown): void {
    if (error instanceof AppError) {
      stream.end(problemFor(error, stream.request), 'access');
      return;
    }
    // The store could not say (it is down): the stream cannot be vouched for, so it ends; the client resumes later.
    // One short line a stream (the database is down for every stream alike): the driver's stack at debug.
    this.#log.warn(`could not check an event stream's credentials again (${faultOf(error)}): stream ended`);
    this.#log.debug({ err: error }, "could not check an event stream's credentials again");
    stream.end(
      problemFor(
        new AppError(
          'service-unavailable',
          "The stream's credentials could not be checked again; reconnect with Last-Event-ID to resume.",
        ),
        stream.request,
      ),
      'error',
    );
  }
}
