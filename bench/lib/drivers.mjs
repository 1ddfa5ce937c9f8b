// The two SQLite drivers rowi runs on, compared in one run: better-sqlite3 under Node 20 (the only
// driver there) and node:sqlite under Node 24 (built into Node 22.13 and later, so nothing to
// compile at install). Each rowi serves a copy of the main rowi's database taken at the same
// moment, with the same settings; only the Node.js binary differs.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { sameRecord } from './checks.mjs';
import { startRowi } from './processes.mjs';
import { sqliteEnv } from './rowi-env.mjs';
import { copyDatabase } from './setup.mjs';

/**
 * A Node.js 24 binary: ROWI_BENCH_NODE24, else the one .ci/run keeps in its cache
 * (node-linux-<arch>@24 from the npm registry). Undefined when there is none.
 */
export function findNode24() {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  const cache =
    process.env.ROWI_CI_NODE24 || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'rowi-ci/node24');
  for (const candidate of [process.env.ROWI_BENCH_NODE24, join(cache, `node_modules/node-linux-${arch}/bin/node`)]) {
    if (candidate && existsSync(candidate) && versionOf(candidate).startsWith('24.')) return candidate;
  }
  return undefined;
}

function versionOf(node) {
  try {
    return execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8', timeout: 10_000 }).trim();
  } catch {
    return '';
  }
}

/**
 * rowi under this Node 20 (better-sqlite3) and under Node 24 (node:sqlite), one process each, on
 * copies of `data`; { skipped } with the reason when the run is not under Node 20 (Node 24 installs
 * no better-sqlite3) or no Node 24 is found.
 */
export async function startDriverServers(bench, { data, credentials, probePath }) {
  const skip = (reason) => {
    console.log(`SQLite drivers compared: skipped (${reason})`);
    return { skipped: reason };
  };
  if (!process.versions.node.startsWith('20.'))
    return skip(
      `the bench runs under Node ${process.versions.node}; run it under Node 20, where better-sqlite3 is installed`,
    );
  const node24 = findNode24();
  if (node24 === undefined)
    return skip('no Node.js 24 found: set ROWI_BENCH_NODE24, or run .ci/run once (it caches one)');
  const copies = ['driver-better-sqlite3.db', 'driver-node-sqlite.db'].map((name) => join(bench.work, name));
  for (const copy of copies) await copyDatabase(data, copy);
  const servers = [];
  for (const [index, { node, driver }] of [
    { node: process.execPath, driver: 'better-sqlite3' },
    { node: node24, driver: 'node:sqlite' },
  ].entries()) {
    const version = index === 0 ? process.versions.node : versionOf(node24);
    const server = await startRowi(
      bench,
      `rowi-${driver.replace(':', '-')}`,
      sqliteEnv(copies[index], 1),
      undefined,
      node,
    );
    Object.assign(server, {
      credentials,
      driver,
      version,
      label: `rowi (SQLite via ${driver}, Node ${version.split('.')[0]}) API key + audit`,
    });
    servers.push(server);
  }
  await sameRecord(
    await Promise.all(
      servers.map(async (server) => ({ label: server.label, url: server.url, headers: await credentials() })),
    ),
    probePath,
  );
  return { servers };
}
