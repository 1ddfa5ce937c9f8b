/**
 * Why a call to an upstream provider gave no usable answer. The kinds are what the HTTP layer
 * needs to choose a status (504 for a timeout, 502 otherwise, with Retry-After for an open
 * circuit) and what Cache-Status `detail` reports; the message says what exactly went wrong.
 */
export type UpstreamFailureKind = 'timeout' | 'bad-answer' | 'unreachable' | 'circuit-open';

export interface UpstreamFailureDetails {
  /** The upstream's HTTP status, when an answer (or at least its status line) arrived. */
  status?: number;
  /** circuit-open only: seconds until the breaker lets a trial call through. */
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class UpstreamFailure extends Error {
  override name = 'UpstreamFailure';
  readonly kind: UpstreamFailureKind;
  readonly status?: number;
  readonly retryAfterSeconds?: number;

  constructor(kind: UpstreamFailureKind, message: string, details: UpstreamFailureDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.kind = kind;
    if (details.status !== undefined) this.status = details.status;
    if (details.retryAfterSeconds !== undefined) this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** True for the reason AbortSignal.timeout() aborts with (a DOMException named TimeoutError). */
export function isTimeoutReason(reason: unknown): boolean {
  return reason instanceof Error && reason.name === 'TimeoutError';
}

/**
 * The failure of a call whose signal aborted: a timeout when the reason is a TimeoutError,
 * otherwise the caller cancelled it (rowi is closing), which no kind describes better than
 * unreachable: the answer will not reach rowi.
 */
export function failureForAbort(signal: AbortSignal, status?: number): UpstreamFailure {
  const details = { cause: signal.reason, ...(status === undefined ? {} : { status }) };
  return isTimeoutReason(signal.reason)
    ? new UpstreamFailure('timeout', 'upstream gave no complete answer within the time limit', details)
    : new UpstreamFailure('unreachable', 'upstream call cancelled', details);
}
