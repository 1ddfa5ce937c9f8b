import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../helpers/process.js';

/**
 * The resident memory of `rowi serve`, idle, as docs/performance.md "Memory" reports it: read and
 * printed, never compared with a target (a memory figure depends on the machine and its load; the
 * targets are checked by `npm run bench`, with ✓ or ✗ beside each). What is asserted is only that
 * the figures were read from a process that serves.
 */

const started: RunningServer[] = [];
afterAll(async () => {
  for (const server of started) await server.stop();
});

function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? 0 : Number(match[1]) / 1024;
}

function workersOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['--ppid', String(pid), '-o', 'pid='], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((child) => child > 0);
  } catch {
    return [];
  }
}

async function servedOnce(server: RunningServer): Promise<number> {
  const reply = await fetch(`${server.baseUrl}/v1/users`, { headers: { 'x-api-key': server.adminKey } });
  await reply.arrayBuffer();
  return reply.status;
}

describe.skipIf(process.platform !== 'linux')('resident memory of rowi serve, idle (printed, not compared)', () => {
  it('GET /v1/users: 200 from one process, whose RSS is read and printed', async () => {
    const server = await startServer({ env: { ROWI_WORKERS: '1' } });
    started.push(server);
    expect(await servedOnce(server)).toBe(200);
    const rss = rssMb(server.child.pid!);
    console.log(`rowi serve, 1 process, idle: RSS ${rss.toFixed(1)} MB (target 80 MB, checked by npm run bench)`);
    expect(rss).toBeGreaterThan(0);
  });

  it('GET /v1/users: 200 from --workers 2, whose primary and workers are read and printed', async () => {
    const server = await startServer({ env: { ROWI_WORKERS: '2' } });
    started.push(server);
    expect(await servedOnce(server)).toBe(200);
    const primary = rssMb(server.child.pid!);
    const workers = workersOf(server.child.pid!).map(rssMb);
    expect(workers).toHaveLength(2);
    const total = primary + workers.reduce((sum, each) => sum + each, 0);
    console.log(
      `rowi serve --workers 2, idle: primary ${primary.toFixed(1)} MB (target 50), workers ${workers.map((each) => each.toFixed(1)).join(' and ')} MB, together ${total.toFixed(1)} MB (target 240 under load)`,
    );
    expect(primary).toBeGreaterThan(0);
  });
});
