import http from 'node:http';
import https from 'node:https';
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
 * A kept-alive connection left idle this long is closed by rowi: before the receiver's own idle
 * time-out (Node's 5 s, nginx's 75 s) can close it under a request rowi is starting on it.
 */
const IDLE_CONNECTION_MS = 2000;

/** The connections rowi keeps to receivers, so that deliveries in a row do not each connect (and shake hands over TLS) anew. */
export interface WebhookAgents {
  http: http.Agent;
  https: https.Agent;
  destroy(): void;
}

/** Agents that keep up to `perReceiver` idle connections to each receiver (its deliveries in flight at once). */
export function webhookAgents(perReceiver = 16): WebhookAgents {
  const options = {
    keepAlive: true,
    timeout: IDLE_CONNECTION_MS,
    maxFreeSockets: perReceiver,
    scheduling: 'lifo' as const,
  };
  const agents = { http: new http.Agent(options), https: new https.Agent(options) };
  return { ...agents, destroy: () => Object.values(agents).forEach((agent) => agent.destroy()) };
}

interface SendOptions {
  timeoutMs: number;
  policy: AddressPolicy;
  userAgent: string;
  agents: WebhookAgents;
}

/**
 * POSTs one delivery: a 2xx answer is a success; anything else (another status, a redirect,
 * which is never followed, a connection that fails or closes, no answer within `timeoutMs`) is a
 * failure with its reason. The URL is checked first, and the connection goes only to addresses the
 * policy allows (ssrf.ts); a URL the policy refuses is a failed attempt that says why. The
 * connection is kept for the next delivery when the answer ended within its limit. A kept connection that the
 * receiver closed just as rowi sent on it is tried once more on a new one (at least once allows it).
 */
export async function sendWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: SendOptions,
): Promise<AttemptOutcome> {
  // The URL as stored may have been allowed by settings this process does not have (an address
  // literal is connected to without a look-up, so the lookup's check would not see it).
  const refused = options.policy.urlRefusal(url);
  if (refused !== undefined)
    return { ok: false, statusCode: null, durationMs: 0, error: `not sent: the URL ${refused}` };
  const first = await attempt(url, body, headers, options);
  return first.retry ? (await attempt(url, body, headers, options)).outcome : first.outcome;
}

function attempt(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: SendOptions,
): Promise<{ outcome: AttemptOutcome; retry: boolean }> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    let ended = false;
    const settle = (outcome: Omit<AttemptOutcome, 'durationMs'>, retry = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // An answer read to its end leaves the connection to the agent, for the next delivery.
      if (!ended) request.destroy();
      resolve({ outcome: { ...outcome, durationMs: elapsed() }, retry });
    };
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    const request = (secure ? https : http).request(target, {
      method: 'POST',
      agent: secure ? options.agents.https : options.agents.http,
      lookup: options.policy.lookup as never,
      headers: {
        ...headers,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'user-agent': options.userAgent,
      },
    });
    let answered: (() => void) | undefined;
    // An answer whose body is slow still counts by its status; no answer at all is a failure.
    const timer = setTimeout(
      () =>
        answered
          ? answered()
          : settle({ ok: false, statusCode: null, error: `no answer within ${options.timeoutMs} ms` }),
      options.timeoutMs,
    );
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      const done = (answered = () =>
        settle(
          status >= 200 && status < 300
            ? { ok: true, statusCode: status, error: null }
            : {
                ok: false,
                statusCode: status,
                error:
                  status >= 300 && status < 400
                    ? `answered ${status} (redirects are not followed)`
                    : `answered ${status}`,
              },
        ));
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= MAX_ANSWER_BYTES) done();
      });
      response.on('end', () => {
        ended = true;
        done();
      });
      response.on('error', done);
      response.on('aborted', done);
    });
    request.on('error', (error: NodeJS.ErrnoException) =>
      settle(
        { ok: false, statusCode: null, error: describe(error) },
        request.reusedSocket && answered === undefined && (error.code === 'ECONNRESET' || error.code === 'EPIPE'),
      ),
    );
    request.end(body);
  });
}

function describe(error: NodeJS.ErrnoException): string {
  if (error.code === 'ECONNREFUSED') return 'connection refused';
  if (error.code === 'ECONNRESET') return 'connection closed by the receiver before it answered';
  if (error.code === 'ENOTFOUND') return 'host not found';
  if (error.code === 'EADDRNOTALLOWED') return error.message;
  return error.message || String(error.code);
}
