import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenMeteo, type FakeOpenMeteo } from './helpers/fake-open-meteo.js';
import { NO_RATE_LIMITS } from './helpers/limits.js';
import { startServer, type RunningServer } from './helpers/process.js';
import { tempFolder } from './helpers/temp.js';

const run = promisify(execFile);
const README = readFileSync(resolve(import.meta.dirname, '../README.md'), 'utf8');
const DOCUMENTED_ORIGIN = 'http://127.0.0.1:8080';

interface Example {
  command: string;
  status: number;
  headers: [string, string][];
}

/**
 * The curl lines of the README, in order, with the status (and headers) their "# →" comment
 * promises. They run against a fresh server, so the README cannot drift from the code.
 */
function examples(): Example[] {
  const blocks = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.replace(/\\\n\s*/g, ''));
  return blocks
    .flatMap((block) => block.split('\n'))
    .filter((line) => line.startsWith('curl '))
    .map((line) => {
      const [command, promise = ''] = line.split(/\s+# → /);
      const status = Number(/^\d{3}/.exec(promise)?.[0]);
      const headers = [...promise.matchAll(/([A-Z][A-Za-z-]+): ([^…]+?)(?=\s+[a-z]|$)/g)].map((match): [string, string] => [match[1]!, match[2]!.trim()]);
      return { command: command!.trim(), status, headers };
    });
}

describe('README examples', () => {
  let server: RunningServer;
  let folder: string;
  let provider: FakeOpenMeteo;
  beforeAll(async () => {
    // The weather examples with a provider run against a local server playing Open-Meteo.
    provider = await startFakeOpenMeteo();
    // The shipped limits, as after npm start (the helpers turn them off for other tests).
    const shippedLimits = Object.fromEntries(Object.keys(NO_RATE_LIMITS).map((name) => [name, '']));
    server = await startServer({ env: { ...shippedLimits, ROWI_WEATHER_PROVIDER: 'open-meteo', ROWI_WEATHER_URL: provider.url } });
    folder = tempFolder('readme');
  });
  afterAll(async () => {
    await server.stop();
    await provider.close();
  });

  it('README: every curl example has a promised status', () => {
    const all = examples();
    expect(all.length).toBeGreaterThanOrEqual(20);
    expect(all.filter((example) => Number.isNaN(example.status))).toEqual([]);
  });

  it('README: every curl example, run in order against a fresh server, gets the status and headers it promises', async () => {
    for (const example of examples()) {
      const command = example.command.replaceAll(DOCUMENTED_ORIGIN, server.baseUrl);
      const { stdout } = await run('sh', ['-c', command], { cwd: folder, env: { ...process.env, ROWI_KEY: server.adminKey } });
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(stdout)?.[1] ?? stdout.trim());
      expect(status, `${example.command}\n${stdout}`).toBe(example.status);
      for (const [name, value] of example.headers) {
        const header = new RegExp(`^${name}: (.*)\\r?$`, 'im').exec(stdout);
        expect(header?.[1]?.trim(), `${name} of ${example.command}\n${stdout}`).toBe(value);
      }
    }
  });
});
