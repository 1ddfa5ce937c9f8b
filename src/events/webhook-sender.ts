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
 * POSTs one delivery: a 2xx answer is a success; anything else (another status, a redirect,
 * which is never followed, a connection that fails or closes, no answer within `timeoutMs`) is a
 * failure with its reason. The connection goes only to addresses the policy allows (ssrf.ts).
 */
export function sendWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: { timeoutMs: number; policy: AddressPolicy; userAgent: string },
): Promise<AttemptOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: Omit<AttemptOutcome, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve({ ...outcome, durationMs: elapsed() });
    };
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    const request = client.request(target, {
      method: 'POST',
      agent: false,
      lookup: options.policy.lookup as never,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': options.userAgent, connection: 'close' },
    });
    let answered: (() => void) | undefined;
    // An answer whose body is slow still counts by its status; no answer at all is a failure.
    const timer = setTimeout(() => (answered ? answered() : settle({ ok: false, statusCode: null, error: `no answer within ${options.timeoutMs} ms` })), options.timeoutMs);
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      const done = (answered = () =>
        settle(
          status >= 200 && status < 300
            ? { ok: true, statusCode: status, error: null }
            : { ok: false, statusCode: status, error: status >= 300 && status < 400 ? `answered ${status} (redirects are not followed)` : `answered ${status}` },
        ));
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= MAX_ANSWER_BYTES) done();
      });
      response.on('end', done);
      response.on('error', done);
      response.on('aborted', done);
    });
    request.on('error', (error: NodeJS.ErrnoException) => settle({ ok: false, statusCode: null, error: describe(error) }));
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
