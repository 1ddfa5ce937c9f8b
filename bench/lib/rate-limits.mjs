// What rate limiting costs: rowi with every limit off, counting in memory and counting in Redis
// (ROWI_BENCH_REDIS_URL, else ROWI_TEST_REDIS_URL, else the local Redis), one process each, on
// copies of rowi's database, so that they differ in nothing but counting.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { countsRequests, sameRecord } from './checks.mjs';
import { startRowi } from './processes.mjs';
import { NO_LIMITS, sqliteEnv } from './rowi-env.mjs';
import { copyDatabase, describeUrl } from './setup.mjs';

const REDIS_URL = process.env.ROWI_BENCH_REDIS_URL || process.env.ROWI_TEST_REDIS_URL || 'redis://127.0.0.1:6379';

/**
 * The three rowi, each on its own copy of rowi's database `data` (the same probe record, the same
 * admin key), each checked to count where it should, all answering the probe as rowi does.
 * An unreachable Redis leaves limitsRedis undefined and redis { skipped }, with a line saying why.
 */
export async function startRateLimitServers(bench, { rowi, data, credentials, probePath }) {
  const startOnCopy = async (name, limits, counted) => {
    const copy = join(bench.work, `${name.replace(/^rowi-/, '')}.db`);
    await copyDatabase(data, copy);
    const server = await startRowi(bench, name, sqliteEnv(copy, 1, limits));
    server.credentials = credentials;
    await countsRequests(server, probePath, counted);
    return server;
  };
  const limitsOff = await startOnCopy('rowi-rate-limits-off', NO_LIMITS, null);
  const limitsMemory = await startOnCopy('rowi-rate-limits-memory', {}, 'instance');
  let limitsRedis;
  let redis;
  const reachable = await tcpReachable(REDIS_URL);
  if (reachable === true) {
    limitsRedis = await startOnCopy('rowi-rate-limits-redis', { ROWI_REDIS_URL: REDIS_URL }, 'redis');
    redis = { where: describeUrl(REDIS_URL) };
  } else {
    redis = { skipped: `${describeUrl(REDIS_URL)} cannot be reached: ${reachable}` };
    console.log(`Rate limits in Redis column skipped: ${redis.skipped} (set ROWI_BENCH_REDIS_URL)`);
  }
  await sameRecord(
    [
      { label: 'rowi', url: rowi.url, headers: await credentials() },
      { label: 'rowi (rate limits off)', url: limitsOff.url, headers: await credentials() },
      { label: 'rowi (rate limits in memory)', url: limitsMemory.url, headers: await credentials() },
      ...(limitsRedis
        ? [{ label: 'rowi (rate limits in Redis)', url: limitsRedis.url, headers: await credentials() }]
        : []),
    ],
    probePath,
  );
  return { limitsOff, limitsMemory, limitsRedis, redis };
}

/** true if a TCP connection to the URL's host and port opens within 2 s; else why not. */
async function tcpReachable(text) {
  let url;
  try {
    url = new URL(text);
  } catch {
    return 'an invalid URL';
  }
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) });
    const done = (result) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(2000, () => done('no connection within 2 s'));
    socket.once('connect', () => done(true));
    socket.once('error', (error) => done(error.code || error.message));
  });
}

/** The error of each "Redis cannot be reached" rowi logged (once each time it stopped answering). */
export function redisFailuresOf(server) {
  const failures = [];
  for (const line of readFileSync(server.logFile, 'utf8').split('\n')) {
    if (!line.includes('"msg":"Redis cannot be reached')) continue;
    try {
      const entry = JSON.parse(line);
      failures.push(entry.err?.message ?? 'no error logged');
    } catch {
      failures.push(line.slice(0, 200));
    }
  }
  return failures;
}
