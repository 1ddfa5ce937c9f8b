// The reading targets of issue 32 (bench/NOTES.md "Reading in bulk"), on one rowi, same run:
// - GET /v1/items?id= with 100 ids against the same 100 single GET /v1/items/{id}, one after
//   another over one kept-alive connection (what a client without ?id= does): ≥ 30× faster;
// - GET /v1/orders/{id}?expand=user,lines.item against the plain GET /v1/orders/{id} of the same
//   order (three lines), in alternating blocks over one kept-alive connection: ≤ 2× its time.
// Bounded: ROUNDS rounds of a fixed number of requests, each request with a time-out.
import { Agent, request } from 'node:http';
import { send } from './setup.mjs';

/** What --only matches to run it. */
export const READING_OPERATION = 'GET /v1/items?id= GET /v1/orders/{id}?expand=';
export const IDS = 100;
export const READING_GOALS = { idsOverSingles: 30, expandedOverPlain: 2 };
const ROUNDS = 5;
/** Reads of each kind per round of the expand comparison, in blocks of BLOCK alternating. */
const READS = 200;
const BLOCK = 20;
const REQUEST_TIMEOUT_MS = 30_000;

/** One GET over `agent` (one socket, kept alive); resolves with its time in ms once the body is read. */
function get(agent, server, headers, path) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const outgoing = request(new URL(path, server.url), { agent, headers, timeout: REQUEST_TIMEOUT_MS }, (reply) => {
      reply.resume();
      reply.on('end', () => {
        if (reply.statusCode !== 200) reject(new Error(`GET ${path} answered ${reply.statusCode}`));
        else resolve(Number(process.hrtime.bigint() - started) / 1e6);
      });
      reply.on('error', reject);
    });
    outgoing.on('timeout', () => outgoing.destroy(new Error(`GET ${path} took over ${REQUEST_TIMEOUT_MS} ms`)));
    outgoing.on('error', reject);
    outgoing.end();
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sum = (values) => values.reduce((total, value) => total + value, 0);

/** Items, a user and an order of their own, then the two comparisons; returns their figures. */
export async function measureReading(server) {
  const stamp = Date.now();
  const created = await send(
    server,
    'POST',
    '/v1/items/batch',
    {
      create: Array.from({ length: IDS }, (_, index) => ({
        name: `Reading bench ${index}`,
        sku: `READ-${stamp}-${index}`,
        price: '1.00',
      })),
    },
    200,
  );
  const ids = created.create.map((result) => result.record.id);
  await send(
    server,
    'POST',
    '/v1/items/stock/batch',
    { set: ids.slice(0, 3).map((id) => ({ item_id: id, quantity: 1000 })) },
    200,
  );
  const user = await send(
    server,
    'POST',
    '/v1/users',
    { name: 'Reading bench', email: `read-${stamp}@example.com` },
    201,
  );
  const order = await send(
    server,
    'POST',
    '/v1/orders',
    { name: 'reading', user_id: user.id, lines: ids.slice(0, 3).map((id) => ({ item_id: id, quantity: 1 })) },
    201,
  );
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { accept: 'application/json', ...(await server.credentials()) };
  const byIds = [];
  const expansion = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const singles = [];
      for (const id of ids) singles.push(await get(agent, server, headers, `/v1/items/${id}`));
      const together = [];
      for (let repeat = 0; repeat < 10; repeat++)
        together.push(await get(agent, server, headers, `/v1/items?id=${ids.join(',')}`));
      byIds.push({ singlesMs: sum(singles), idsMs: median(together) });
      const plain = [];
      const expanded = [];
      for (let block = 0; block < READS / BLOCK; block++) {
        for (let n = 0; n < BLOCK; n++) plain.push(await get(agent, server, headers, `/v1/orders/${order.id}`));
        for (let n = 0; n < BLOCK; n++)
          expanded.push(await get(agent, server, headers, `/v1/orders/${order.id}?expand=user,lines.item`));
      }
      expansion.push({ plainMs: median(plain), expandedMs: median(expanded) });
    }
  } finally {
    agent.destroy();
  }
  const singlesMs = median(byIds.map((each) => each.singlesMs));
  const idsMs = median(byIds.map((each) => each.idsMs));
  return {
    ids: IDS,
    rounds: ROUNDS,
    singles_ms: singlesMs,
    ids_ms: idsMs,
    ids_ratio: median(byIds.map((each) => each.singlesMs / each.idsMs)),
    plain_ms: median(expansion.map((each) => each.plainMs)),
    expanded_ms: median(expansion.map((each) => each.expandedMs)),
    expand_ratio: median(expansion.map((each) => each.expandedMs / each.plainMs)),
  };
}

/** The goal lines of the targets, as printGoals shows the others. */
export function readingGoalLines(reading) {
  return [
    {
      verdict: reading.ids_ratio >= READING_GOALS.idsOverSingles ? '✓' : '✗',
      label: `GET /v1/items?id= with ${reading.ids} ids over ${reading.ids} single GET /v1/items/{id}, one keep-alive connection`,
      goal: `≥ ${READING_GOALS.idsOverSingles}×`,
      figure: `x${reading.ids_ratio.toFixed(1)} (${reading.ids_ms.toFixed(1)} ms vs ${reading.singles_ms.toFixed(0)} ms, median of ${reading.rounds} rounds)`,
    },
    {
      verdict: reading.expand_ratio <= READING_GOALS.expandedOverPlain ? '✓' : '✗',
      label: 'GET /v1/orders/{id}?expand=user,lines.item over the plain read (3 lines), one keep-alive connection',
      goal: `≤ ${READING_GOALS.expandedOverPlain}×`,
      figure: `x${reading.expand_ratio.toFixed(2)} (median ${reading.expanded_ms.toFixed(2)} ms vs ${reading.plain_ms.toFixed(2)} ms, ${READS} reads of each a round, median of ${reading.rounds} rounds)`,
    },
  ];
}
