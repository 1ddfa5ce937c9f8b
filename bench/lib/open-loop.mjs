// An open-loop load: requests sent at a constant rate whatever the server answers (as wrk2 does),
// each timed from when it was meant to be sent, not from when a free connection let it go. A
// server that stalls for a while then shows the whole wait of every request due meanwhile, which a
// closed loop (a fixed count of connections, each waiting for its answer) hides by sending less.
//
// The sending runs on a thread of its own: the bench's webhook receiver shares the bench's event
// loop, and its work would otherwise delay the sends and count as the server's.
import { Agent, request } from 'node:http';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { orderBodies } from './order-mix.mjs';

/** Connections at most: enough that a stall of the server, not the generator, decides when requests go. */
const MAX_CONNECTIONS = 256;

/**
 * Sends `rate` requests a second of `target` (method, path, headers, orders: a mix for
 * orderBodies) for `seconds`, from a thread of its own; answers { rps, p50, p99, requests, errors }
 * (latencies in ms from the intended send time).
 */
export async function openLoop(target, rate, seconds) {
  const plan = {
    url: target.server.url,
    path: target.path,
    method: target.method,
    headers: { ...target.headers, ...(await target.credentials?.()) },
    orders: target.orders,
    rate,
    seconds,
  };
  const worker = new Worker(new URL(import.meta.url), { workerData: plan });
  return new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

if (!isMainThread) parentPort.postMessage(await send(workerData));

async function send({ url: base, path, method, headers, orders, rate, seconds }) {
  const url = new URL(base);
  const target = { path, method };
  const bodies = orderBodies(orders);
  const agent = new Agent({ keepAlive: true, maxSockets: MAX_CONNECTIONS });
  const latencies = [];
  let errors = 0;
  const inFlight = new Set();
  const total = Math.round(rate * seconds);
  const started = performance.now();
  for (let index = 0; index < total; index++) {
    const intended = started + (index * 1000) / rate;
    const wait = intended - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const body = bodies();
    const sent = new Promise((resolve) => {
      const call = request(
        {
          host: url.hostname,
          port: url.port,
          path: target.path,
          method: target.method,
          agent,
          headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          response.resume();
          response.on('end', () => {
            if (response.statusCode >= 200 && response.statusCode < 300) latencies.push(performance.now() - intended);
            else errors++;
            resolve();
          });
        },
      );
      call.on('error', () => {
        errors++;
        resolve();
      });
      call.end(body);
    });
    inFlight.add(sent);
    void sent.then(() => inFlight.delete(sent));
  }
  await Promise.all(inFlight);
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (fraction) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * fraction))] ?? 0;
  return { rps: latencies.length / elapsed, p50: at(0.5), p99: at(0.99), requests: latencies.length, errors };
}
