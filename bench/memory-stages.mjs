// Where a rowi process's memory goes, stage by stage of its start (docs/performance.md "Memory").
// Run after `npm run build`: node --expose-gc bench/memory-stages.mjs [--postgres URL]
// Each figure is process.memoryUsage() after a full garbage collection: RSS, V8 heap used,
// and "external" (Buffers and native memory V8 knows of), in MB.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const mb = (bytes) => (bytes / 1048576).toFixed(1);
const rows = [];
const measure = (stage) => {
  globalThis.gc?.();
  const usage = process.memoryUsage();
  const last = rows.at(-1);
  rows.push({ stage, rss: usage.rss, heap: usage.heapUsed, external: usage.external });
  const grew = last === undefined ? '' : `+${mb(usage.rss - last.rss)}`;
  console.log(
    `${stage.padEnd(58)} rss ${mb(usage.rss).padStart(6)} ${grew.padStart(6)}  heap ${mb(usage.heapUsed).padStart(5)}  external ${mb(usage.external).padStart(5)}`,
  );
};
const dist = new URL('../dist/src/', import.meta.url);
const load = (path) => import(new URL(path, dist).href);

measure('node, nothing loaded');
await load('process/cluster.js');
measure('what the primary of --workers loads (pino, node:cluster)');
const { loadConfig } = await load('config/config.js');
measure('config (typebox, ajv, the settings schemas)');
const { createLogger } = await load('observability/logger.js');
measure('logger (pino)');
const { openStorage } = await load('db/connect.js');
measure('database layer (kysely, the SQLite driver; pg only on PostgreSQL)');
const { buildApp } = await load('app.js');
const { APP_THREADS } = await load('process/threads.js');
measure('the app modules (fastify, routes, schemas, plugins)');

const folder = mkdtempSync(join(tmpdir(), 'rowi-memory-'));
const postgres = process.argv.indexOf('--postgres');
const config = loadConfig({
  ...(postgres > 0 ? { ROWI_DATABASE_URL: process.argv[postgres + 1] } : { ROWI_DATA: join(folder, 'rowi.db') }),
  ROWI_LOG_LEVEL: 'silent',
});
const logger = createLogger(config);
const storage = await openStorage(config, logger);
const { prepareDatabase } = await load('process/startup.js');
await prepareDatabase(storage);
measure('database opened and migrated');
const app = await buildApp({ config, storage, logger, threads: APP_THREADS });
measure('app built (routes registered)');
await app.ready();
measure('app ready (validators and serialisers compiled)');
await app.listen({ host: '127.0.0.1', port: 0 });
const origin = `http://127.0.0.1:${app.server.address().port}`;
measure('listening');
for (let i = 0; i < 200; i++) await fetch(`${origin}/v1/users/1`);
measure('200 requests served (401: no key)');
await fetch(`${origin}/v1/openapi.json`).then((reply) => reply.arrayBuffer());
measure('GET /v1/openapi.json served once (the document, cached)');
const heap = await import('node:v8').then((v8) => v8.getHeapSpaceStatistics());
console.log('\nV8 heap spaces (MB used / size):');
for (const space of heap)
  console.log(
    `  ${space.space_name.padEnd(24)} ${mb(space.space_used_size).padStart(6)} / ${mb(space.space_size).padStart(6)}`,
  );
await app.close();
await storage.close();
rmSync(folder, { recursive: true, force: true });
if (process.argv.includes('--json')) console.log(JSON.stringify(rows));
