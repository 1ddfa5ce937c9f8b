import { request as httpRequest, type IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { sample } from '../helpers/metrics.js';
import { bulkyOrders, eventsMadeAfter } from '../helpers/sse.js';
import { dereferenced } from '../helpers/openapi.js';
import { createCallerWithKey, createUser } from '../helpers/records.js';
import type { Schema } from './arbitraries.js';
import { requestFor, type FuzzRequest, type Operation } from './requests.js';
import { ResponseChecker } from './responses.js';

/**
 * The event stream of the OpenAPI document, fuzzed as api.fuzz.test.ts fuzzes every operation, and
 * held open by clients that behave as clients do: read as events come, read slowly (pausing
 * between chunks), never read, or leave at once, a few at a time while events are made, some of
 * them bulky (far past the smallest ROWI_EVENTS_STREAM_BUFFER). Every answer must be one the
 * document lists; a stream that reads, fast or slowly, gets the events it asked for and may see,
 * once each and in order, and no other, and keeps its connection; once its clients are gone no
 * stream is left counted (rowi_event_streams_open is back where it was, the caller may open
 * streams again); and the app still answers. Seeded like api.fuzz.test.ts (ROWI_FUZZ_SEED,
 * ROWI_FUZZ_RUNS).
 */
const SEED = Number(process.env.ROWI_FUZZ_SEED ?? 20_261_126);
const RUNS = Math.max(10, Math.round(Number(process.env.ROWI_FUZZ_RUNS ?? 50) / 2));
type Behaviour = 'read' | 'read slowly' | 'never read' | 'leave at once';

let test: TestApp;
let base: string;
let checker: ResponseChecker;
let operation: Operation;
let credentials: { admin: string; reader: string };
let fixtures: (string | number)[];
let placeBulkyOrder: () => Promise<void>;
/** ROWI_EVENTS_STREAM_BUFFER here: the least it may be, so that slow readers meet it. */
const BOUND = 16_384;

beforeAll(async () => {
  test = await startApp({ ROWI_EVENTS_HEARTBEAT: '1', ROWI_EVENTS_STREAM_BUFFER: String(BOUND) });
  const document = dereferenced(test.app.swagger()) as unknown as {
    paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
    components: { schemas: Record<string, Schema> };
  };
  checker = new ResponseChecker(document.components.schemas);
  operation = { ...document.paths['/v1/events/stream']!.get!, method: 'GET', path: '/v1/events/stream' };
  operation.parameters ??= [];
  const reader = await createCallerWithKey(test, { role: 'reader', name: 'stream-fuzz-reader' });
  credentials = { admin: test.adminKey, reader: reader.key };
  await createUser(test);
  fixtures = [(await test.call({ url: '/v1/events?limit=1' })).json.data[0].id];
  const placeOrder = await bulkyOrders(test);
  placeBulkyOrder = async () => void (await placeOrder());
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => test.close());

interface Received {
  id: string | undefined;
  event: string;
  data: { type?: string; path?: string; data?: { id?: number } };
}

interface Session {
  status: number;
  answer: { status: number; headers: IncomingMessage['headers']; body: string; ms: number };
  received: Received[];
  /** The connection has closed (the client left, or the server cut it off). */
  closed: boolean;
  close(): void;
}

/** Opens the stream over a connection of its own and behaves as told once the answer's head is in. */
function openStream(sent: FuzzRequest, behaviour: Behaviour): Promise<Session> {
  const started = performance.now();
  // Header values go as their UTF-8 bytes, as api.fuzz.test.ts sends them (Node's client takes Latin-1 only).
  const headers = Object.fromEntries(
    Object.entries(sent.headers).map(([name, value]) => [name, Buffer.from(String(value), 'utf8').toString('latin1')]),
  );
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(`${base}${sent.url}`, { method: sent.method, headers, agent: false }, (response) => {
      const status = response.statusCode ?? 0;
      const session: Session = {
        status,
        answer: { status, headers: response.headers, body: '', ms: 0 },
        received: [],
        closed: false,
        close: () => outgoing.destroy(),
      };
      response.socket.once('close', () => (session.closed = true));
      if (status !== 200 || sent.method === 'HEAD') {
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (session.answer.body += chunk));
        response.on('end', () =>
          resolve({ ...session, answer: { ...session.answer, ms: performance.now() - started } }),
        );
        return;
      }
      session.answer.ms = performance.now() - started;
      if (behaviour === 'leave at once') outgoing.destroy();
      if (behaviour === 'read' || behaviour === 'read slowly')
        read(response, session.received, behaviour === 'read slowly');
      resolve(session);
    });
    outgoing.on('error', (error) => (outgoing.destroyed ? undefined : reject(error)));
    outgoing.end(sent.body);
  });
}

function read(response: IncomingMessage, received: Received[], slowly: boolean): void {
  let buffer = '';
  response.setEncoding('utf8');
  response.on('error', () => undefined);
  response.on('data', (chunk: string) => {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const fields = Object.fromEntries(
        buffer
          .slice(0, end)
          .split('\n')
          .filter((line) => !line.startsWith(':'))
          .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
      );
      buffer = buffer.slice(end + 2);
      if (fields.data !== undefined)
        received.push({ id: fields.id, event: fields.event!, data: JSON.parse(fields.data) as Received['data'] });
    }
    if (slowly) {
      response.pause();
      setTimeout(() => response.resume(), 2 + (received.length % 5) * 2);
    }
  });
}

const openStreams = async () => sample((await test.call({ url: '/metrics' })).text, 'rowi_event_streams_open');
const slowReadersCut = async () =>
  sample((await test.call({ url: '/metrics' })).text, 'rowi_event_streams_ended_total', { reason: 'slow_reader' });
/** Event types of resources only an admin reads (callers, webhook endpoints). */
const ADMIN_ONLY = /^(caller|api_key|webhook)\./;

async function eventually(check: () => Promise<boolean> | boolean, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/** The types a stream asked for, when its query was valid (a 200 means it was). */
function typesAsked(url: string): Set<string> | undefined {
  const types = new URLSearchParams(url.split('?')[1] ?? '').get('types');
  return types === null ? undefined : new Set(types.split(','));
}

/** What a stream asked for and may see, of the events made. */
function visibleTo(sent: FuzzRequest, made: { id: string; type: string }[]): string[] {
  const asked = typesAsked(sent.url);
  const admin = sent.headers['x-api-key'] === credentials.admin;
  return made
    .filter((event) => (asked === undefined || asked.has(event.type)) && (admin || !ADMIN_ONLY.test(event.type)))
    .map((event) => event.id);
}

describe('fuzzing the event stream with clients that read, read slowly, never read, or leave', () => {
  it(
    `every answer is documented; a reading stream gets what it may see, once and in order, and stays open; nothing stays counted once its clients are gone (seed ${SEED}, ${RUNS} runs)`,
    { timeout: 600_000 },
    async () => {
      const stream = fc.record({
        sent: requestFor(operation, credentials, () => fixtures),
        behaviour: fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom<Behaviour>('read', 'read slowly') },
          { weight: 2, arbitrary: fc.constantFrom<Behaviour>('never read', 'leave at once') },
        ),
        head: fc.integer({ min: 0, max: 9 }).map((draw) => draw === 0),
      });
      /** What the run reached: answers by status, and streams whose events were checked, by behaviour. */
      const statuses = new Map<number, number>();
      const checked = new Map<Behaviour, number>();
      const cutBefore = await slowReadersCut();
      // The streams of other apps in this process are closed by now: this counts this app's.
      const before = await openStreams();
      await fc.assert(
        fc.asyncProperty(
          fc.array(stream, { minLength: 1, maxLength: 3 }),
          fc.integer({ min: 0, max: 3 }),
          fc.integer({ min: 0, max: 6 }),
          fc.boolean(),
          async (streams, users, bulkyOrders, withCaller) => {
            const afterId = (await test.call({ url: '/v1/events?limit=1' })).json.data[0].id as string;
            const sessions: Session[] = [];
            try {
              for (const { sent, behaviour, head } of streams)
                sessions.push(await openStream(head ? { ...sent, method: 'HEAD' } : sent, behaviour));
              for (const [index, session] of sessions.entries()) {
                statuses.set(session.status, (statuses.get(session.status) ?? 0) + 1);
                const problem = checker.problemWith(
                  { ...operation, method: streams[index]!.head ? 'HEAD' : 'GET' },
                  session.answer,
                );
                if (problem !== undefined)
                  throw new Error(
                    `${streams[index]!.sent.url}: ${problem}\nanswer ${session.status}: ${session.answer.body.slice(0, 600)}`,
                  );
              }
              // Events while the streams are open: users, orders of a hundred lines (about 50 KB of
              // events each, past ROWI_EVENTS_STREAM_BUFFER), a caller (only an admin sees it).
              for (let index = 0; index < users; index++) await createUser(test);
              for (let index = 0; index < bulkyOrders; index++) await placeBulkyOrder();
              if (withCaller) await createCallerWithKey(test, { role: 'reader' });
              const made = await eventsMadeAfter(test, afterId);
              for (const [index, session] of sessions.entries()) {
                const { sent, behaviour, head } = streams[index]!;
                if (session.status !== 200 || head || !behaviour.startsWith('read')) continue;
                checked.set(behaviour, (checked.get(behaviour) ?? 0) + 1);
                const expected = visibleTo(sent, made);
                const ids = () => session.received.map((event) => event.id!).filter((id) => id > afterId);
                await eventually(() => ids().length >= expected.length, 10_000);
                expect(ids()).toEqual(expected);
                // However far past the bound it was owed, a client that reads keeps its connection.
                expect(session.closed).toBe(false);
              }
            } finally {
              for (const session of sessions) session.close();
            }
            expect(await eventually(async () => (await openStreams()) === before)).toBe(true);
            expect((await test.call({ url: '/health/live', key: null })).status).toBe(200);
          },
        ),
        { seed: SEED, numRuns: RUNS, includeErrorInReport: true },
      );
      const cut = (await slowReadersCut()) - cutBefore;
      console.log(
        `stream fuzz (seed ${SEED}): statuses ${[...statuses]
          .sort(([a], [b]) => a - b)
          .map(([status, count]) => `${status}×${count}`)
          .join(
            ' ',
          )}; events checked on ${[...checked].map(([behaviour, count]) => `${count} streams that ${behaviour}`).join(', ')}; ${cut} streams cut off as slow readers`,
      );
      expect([...checked.values()].reduce((sum, count) => sum + count, 0)).toBeGreaterThan(RUNS / 4);
      // The caller may open as many streams as it may hold: none was left counted against it.
      const again = await Promise.all(
        Array.from({ length: test.config.eventsMaxStreams }, () =>
          openStream(
            { method: 'GET', url: '/v1/events/stream', headers: { 'x-api-key': test.adminKey } },
            'leave at once',
          ),
        ),
      );
      expect(again.map((session) => session.status)).toEqual(again.map(() => 200));
      expect(await eventually(async () => (await openStreams()) === before)).toBe(true);
      expect((await test.call({ url: '/v1/users?limit=1' })).status).toBe(200);
    },
  );
});
