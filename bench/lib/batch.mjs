// The batch target (bench/NOTES.md "Batches"): setting 1,000 stock levels in one
// POST /v1/items/stock/batch against the same 1,000 single PUT /v1/items/{id}/stock, one after
// another over one kept-alive connection (what a client without batches does), on the same rowi in
// the same run. Bounded: ROUNDS rounds of ENTRIES writes each, every request with a time-out.
import { Agent, request } from 'node:http';
import { send } from './setup.mjs';

export const BATCH_ENTRIES = 1000;
/** What --only matches to run it. */
export const BATCH_OPERATION = 'POST /v1/items/stock/batch';
const ROUNDS = 3;
const REQUEST_TIMEOUT_MS = 30_000;
/** The rate of the batch over the singles the target asks for (docs/performance.md). */
export const BATCH_GOAL = 20;

/** One request over `agent` (one socket, kept alive); resolves with its status once the body is read. */
function call(agent, server, headers, method, path, body) {
  return new Promise((resolve, reject) => {
    const url = new URL(path, server.url);
    const payload = JSON.stringify(body);
    const outgoing = request(
      url,
      {
        agent,
        method,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (reply) => {
        reply.resume();
        reply.on('end', () => resolve(reply.statusCode));
        reply.on('error', reject);
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error(`${method} ${path} took over ${REQUEST_TIMEOUT_MS} ms`)));
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * Items of their own (created by an items batch), then per round: the singles, then the batch,
 * each setting every quantity to a value it does not have yet (a write that changes nothing
 * writes nothing). Returns the rates and their ratio (median of the rounds' ratios).
 */
export async function measureBatch(server) {
  const stamp = Date.now();
  const created = await send(
    server,
    'POST',
    '/v1/items/batch',
    {
      create: Array.from({ length: BATCH_ENTRIES }, (_, index) => ({
        name: `Batch bench ${index}`,
        sku: `BATCH-${stamp}-${index}`,
        price: '1.00',
      })),
    },
    200,
  );
  const ids = created.create.map((result) => result.record.id);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { accept: 'application/json', ...(await server.credentials()) };
  const rounds = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const singlesStart = process.hrtime.bigint();
      for (const id of ids) {
        const status = await call(agent, server, headers, 'PUT', `/v1/items/${id}/stock`, { quantity: 2 * round + 1 });
        if (status !== 200) throw new Error(`PUT /v1/items/${id}/stock answered ${status}`);
      }
      const singlesMs = Number(process.hrtime.bigint() - singlesStart) / 1e6;
      const batchStart = process.hrtime.bigint();
      const status = await call(agent, server, headers, 'POST', '/v1/items/stock/batch', {
        set: ids.map((id) => ({ item_id: id, quantity: 2 * round + 2 })),
      });
      const batchMs = Number(process.hrtime.bigint() - batchStart) / 1e6;
      if (status !== 200) throw new Error(`POST /v1/items/stock/batch answered ${status}`);
      rounds.push({ singlesMs, batchMs, ratio: singlesMs / batchMs });
    }
  } finally {
    agent.destroy();
  }
  const singlesMs = median(rounds.map((each) => each.singlesMs));
  const batchMs = median(rounds.map((each) => each.batchMs));
  return {
    entries: BATCH_ENTRIES,
    rounds: ROUNDS,
    singles_per_s: (BATCH_ENTRIES / singlesMs) * 1000,
    batch_entries_per_s: (BATCH_ENTRIES / batchMs) * 1000,
    singles_ms: singlesMs,
    batch_ms: batchMs,
    ratio: median(rounds.map((each) => each.ratio)),
  };
}

/** The goal line of the target, as printGoals shows the others. */
export function batchGoalLine(batch) {
  return {
    verdict: batch.ratio >= BATCH_GOAL ? '✓' : '✗',
    label: `a batch of ${batch.entries} stock levels over ${batch.entries} single PUTs, one keep-alive connection (SQLite)`,
    goal: `≥ ${BATCH_GOAL}×`,
    figure: `x${batch.ratio.toFixed(1)} (${batch.batch_entries_per_s.toFixed(0)} vs ${batch.singles_per_s.toFixed(0)} levels/s; ${batch.batch_ms.toFixed(0)} ms vs ${batch.singles_ms.toFixed(0)} ms, median of ${batch.rounds} rounds)`,
  };
}
