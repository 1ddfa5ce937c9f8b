import pino from 'pino';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';

/** Every line rowi logs, parsed. */
const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString().split('\n'))
      if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

let test: TestApp;
beforeAll(async () => {
  test = await startApp({}, pino({ level: 'info' }, sink));
});
afterAll(() => test.close());

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
const TRACERESPONSE = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The log lines of one request, found by its request id. */
const linesOf = (requestId: string) => lines.filter((line) => line.reqId === requestId);

describe('W3C trace context', () => {
  it("GET /v1/users: traceresponse carries the caller's trace id and flags, with rowi's own span id, and every log line of the request has the trace id", async () => {
    const reply = await test.call({
      url: '/v1/users',
      headers: { traceparent: TRACEPARENT, 'x-request-id': 'trace-1' },
    });
    expect(reply.status).toBe(200);
    const [, traceId, spanId, flags] = TRACERESPONSE.exec(String(reply.headers.traceresponse))!;
    expect(traceId).toBe(TRACE_ID);
    expect(flags).toBe('01');
    expect(spanId).not.toBe('00f067aa0ba902b7');
    const logged = linesOf('trace-1');
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.every((line) => line.trace_id === TRACE_ID)).toBe(true);
  });

  it('POST /v1/users: a problem answer carries the trace too, and its log lines have the trace id', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      body: { name: '' },
      headers: { traceparent: TRACEPARENT, 'x-request-id': 'trace-2' },
    });
    expectProblem(reply, 422, 'validation-failed');
    expect(String(reply.headers.traceresponse)).toMatch(new RegExp(`^00-${TRACE_ID}-`));
    expect(linesOf('trace-2').every((line) => line.trace_id === TRACE_ID)).toBe(true);
  });

  it("GET /v1/%zz: the framework's own refusal (400) carries the trace", async () => {
    const reply = await test.call({ url: '/v1/%zz', headers: { traceparent: TRACEPARENT } });
    expectProblem(reply, 400, 'bad-request');
    expect(String(reply.headers.traceresponse)).toMatch(new RegExp(`^00-${TRACE_ID}-`));
  });

  it.each([
    ['no traceparent', undefined],
    ['a malformed traceparent', 'not-a-trace'],
    ['upper-case hex', `00-${TRACE_ID.toUpperCase()}-00f067aa0ba902b7-01`],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['an all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
    ['version ff', `ff-${TRACE_ID}-00f067aa0ba902b7-01`],
    ['version 00 with more fields', `${TRACEPARENT}-extra`],
  ])('GET /v1/users: a new trace (flags 00) for %s, never an error', async (_case, traceparent) => {
    const requestId = `trace-new-${lines.length}`;
    const reply = await test.call({
      url: '/v1/users',
      headers: { 'x-request-id': requestId, ...(traceparent === undefined ? {} : { traceparent }) },
    });
    expect(reply.status).toBe(200);
    const [, traceId, , flags] = TRACERESPONSE.exec(String(reply.headers.traceresponse))!;
    expect(traceId).not.toBe(TRACE_ID);
    expect(traceId).not.toBe('0'.repeat(32));
    expect(flags).toBe('00');
    expect(linesOf(requestId).every((line) => line.trace_id === traceId)).toBe(true);
  });

  it("GET /v1/users: a later version's traceparent with more fields is read for its trace id", async () => {
    const reply = await test.call({
      url: '/v1/users',
      headers: { traceparent: `01-${TRACE_ID}-00f067aa0ba902b7-01-future` },
    });
    expect(String(reply.headers.traceresponse)).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
  });

  it('two requests without traceparent get different traces', async () => {
    const first = await test.call({ url: '/v1/users' });
    const second = await test.call({ url: '/v1/users' });
    expect(TRACERESPONSE.exec(String(first.headers.traceresponse))![1]).not.toBe(
      TRACERESPONSE.exec(String(second.headers.traceresponse))![1],
    );
  });

  it('GET /v1/limits: new trace ids and span ids are random, with no shared prefix or counter, when many requests come without traceparent', async () => {
    const traceIds: string[] = [];
    const spanIds: string[] = [];
    // Sequential, as a client sees them; 256 ids of random hex leave every digit position about 16 values.
    for (let index = 0; index < 256; index++) {
      const [, traceId, spanId] = TRACERESPONSE.exec(
        String((await test.call({ url: '/v1/limits', key: null })).headers.traceresponse),
      )!;
      traceIds.push(traceId!);
      spanIds.push(spanId!);
    }
    for (const ids of [traceIds, spanIds]) {
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.every((id) => /^[0-9a-f]+$/.test(id) && !/^0+$/.test(id))).toBe(true);
      // A per-process prefix is one value at each of its positions; a counter's high digits barely move.
      const positions = Array.from(
        { length: ids[0]!.length },
        (_, position) => new Set(ids.map((id) => id[position])).size,
      );
      expect(
        Math.min(...positions),
        `distinct hex digits at each position: ${positions.join(' ')}`,
      ).toBeGreaterThanOrEqual(8);
      // Nor does one id follow from the one before: no two in a row differ by a small step.
      const steps = ids.slice(1).map((id, index) => BigInt(`0x${id}`) - BigInt(`0x${ids[index]!}`));
      expect(steps.filter((step) => step > -1000n && step < 1000n)).toEqual([]);
    }
  });
});
