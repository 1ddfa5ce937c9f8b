import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sample } from '../helpers/metrics.js';
import { startServer, type RunningServer } from '../helpers/process.js';

/**
 * /metrics under `rowi serve --workers 2`: whichever worker a scrape reaches, it answers every
 * worker's metrics added up (the primary collects them), so a scraper sees the whole service.
 */
let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ args: ['--workers', '2'] });
});
afterAll(() => server.stop());

const get = async (path: string) => {
  const reply = await fetch(`${server.baseUrl}${path}`, {
    headers: { 'x-api-key': server.adminKey, connection: 'close' },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: reply.status, text: await reply.text(), type: reply.headers.get('content-type') };
};

describe('GET /metrics with --workers 2', () => {
  it('counts the requests of both workers in every scrape, whichever worker answers it', async () => {
    const labels = { route: '/v1/users', method: 'GET', status_class: '2xx' };
    const before = sample((await get('/metrics')).text, 'rowi_http_request_duration_seconds_count', labels);
    // A new connection for each: the primary deals connections to the workers in turn.
    for (let index = 0; index < 20; index++) expect((await get('/v1/users')).status).toBe(200);
    const counts = [];
    for (let index = 0; index < 4; index++) {
      const scrape = await get('/metrics');
      expect(scrape.status).toBe(200);
      expect(scrape.type).toBe('text/plain; version=0.0.4; charset=utf-8');
      counts.push(sample(scrape.text, 'rowi_http_request_duration_seconds_count', labels) - before);
    }
    expect(counts).toEqual([20, 20, 20, 20]);
    // Process metrics are added up too: two processes' resident memory, each well above 10 MB.
    expect(sample((await get('/metrics')).text, 'process_resident_memory_bytes')).toBeGreaterThan(2 * 10_000_000);
  });
});
