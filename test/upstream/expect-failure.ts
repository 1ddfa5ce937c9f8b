import { expect } from 'vitest';
import { UpstreamFailure } from '../../src/upstream/upstream-failure.js';

/** The UpstreamFailure `promise` rejects with; fails the test if it resolves or rejects with anything else. */
export async function failureOf(promise: Promise<unknown>): Promise<UpstreamFailure> {
  const outcome = await promise.then(
    (value) => ({ resolved: value }),
    (error: unknown) => ({ rejected: error }),
  );
  if (!('rejected' in outcome)) throw new Error(`expected an UpstreamFailure, got ${JSON.stringify(outcome.resolved)}`);
  expect(outcome.rejected).toBeInstanceOf(UpstreamFailure);
  return outcome.rejected as UpstreamFailure;
}
