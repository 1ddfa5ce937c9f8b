import { VERSION } from '../version.js';
import { failureForAbort, UpstreamFailure } from './upstream-failure.js';

export interface FetchJsonOptions {
  signal: AbortSignal;
  /** Largest body read; a bigger one is a bad answer and is not read further. */
  maxBytes: number;
  headers?: Record<string, string>;
}

const USER_AGENT = `rowi/${VERSION}`;

/**
 * GET `url` and parse its JSON body, on Node's fetch (undici, which keeps connections alive).
 * Any status is returned with its body, as long as the body is JSON: the caller knows what
 * its upstream's error bodies mean. Everything else throws UpstreamFailure:
 * - timeout: `signal` aborted with a TimeoutError, while connecting or reading the body;
 * - unreachable: no answer at all (refused, reset, DNS), or `signal` aborted for another reason;
 * - bad-answer: a redirect, a body that is not JSON (by Content-Type or by parsing), cut off,
 *   or larger than maxBytes.
 */
export async function fetchJson(url: URL, options: FetchJsonOptions): Promise<{ status: number; body: unknown }> {
  const { signal, maxBytes } = options;
  let response: Response;
  try {
    response = await fetch(url, {
      signal,
      // A redirect is answered as it is (no Location is followed): an API that moves is a
      // configuration matter, and following could leave the host the operator chose.
      redirect: 'manual',
      headers: { accept: 'application/json', 'user-agent': USER_AGENT, ...options.headers },
    });
  } catch (error) {
    throw failureBeforeAnswer(error, signal, url);
  }
  const status = response.status;
  try {
    if (status >= 300 && status < 400) {
      throw new UpstreamFailure(
        'bad-answer',
        `upstream redirected (HTTP ${status} to ${response.headers.get('location') ?? 'nowhere'})`,
        { status },
      );
    }
    const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (mediaType !== 'application/json' && !mediaType.endsWith('+json')) {
      throw new UpstreamFailure(
        'bad-answer',
        `upstream answered HTTP ${status} with ${mediaType || 'no Content-Type'}, not JSON`,
        { status },
      );
    }
    const text = await readText(response, maxBytes);
    try {
      return { status, body: JSON.parse(text) };
    } catch (error) {
      throw new UpstreamFailure('bad-answer', `upstream answered HTTP ${status} with a body that is not valid JSON`, {
        status,
        cause: error,
      });
    }
  } catch (error) {
    // Whatever is left of the body is not wanted; cancelling closes the connection instead of
    // reading the rest into nowhere.
    if (response.body && !response.bodyUsed) void response.body.cancel().catch(() => {});
    throw failureDuringAnswer(error, signal, status);
  }
}

/** The body as UTF-8 text, refusing it past maxBytes: announced (Content-Length) or counted. */
async function readText(response: Response, maxBytes: number): Promise<string> {
  const status = response.status;
  const tooLarge = () =>
    new UpstreamFailure('bad-answer', `upstream answer is larger than ${maxBytes} bytes`, { status });
  const declared = response.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge();
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      void reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, total));
  } catch (error) {
    throw new UpstreamFailure('bad-answer', 'upstream answer is not valid UTF-8', { status, cause: error });
  }
}

function failureBeforeAnswer(error: unknown, signal: AbortSignal, url: URL): UpstreamFailure {
  if (signal.aborted) return failureForAbort(signal);
  const code = errorCode(error);
  // undici's HTTP parser errors (HPE_*): something answered, but not with HTTP.
  if (code?.startsWith('HPE_'))
    return new UpstreamFailure('bad-answer', `upstream answer is not valid HTTP (${code})`, { cause: error });
  const reason = code ?? (error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error));
  return new UpstreamFailure('unreachable', `cannot reach ${url.host}: ${reason}`, { cause: error });
}

function failureDuringAnswer(error: unknown, signal: AbortSignal, status: number): UpstreamFailure {
  if (error instanceof UpstreamFailure) return error;
  if (signal.aborted) return failureForAbort(signal, status);
  return new UpstreamFailure('bad-answer', `upstream answer was cut off (${errorCode(error) ?? String(error)})`, {
    status,
    cause: error,
  });
}

/** The system or undici error code, which undici puts on the `cause` of its TypeError. */
function errorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 4; current = current.cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}
