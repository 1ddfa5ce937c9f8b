import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenMeteo, type FakeOpenMeteo } from '../helpers/fake-open-meteo.js';
import { NO_RATE_LIMITS } from '../helpers/rate-limits.js';
import { startServer, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';
import { EXAMPLE_FILES, readDoc } from '../helpers/docs.js';
import { PROBLEM_TYPES } from '../../src/problem-types.js';

const run = promisify(execFile);

const DOCUMENTED_ORIGIN = 'http://127.0.0.1:8080';

interface Example {
  file: string;
  command: string;
  status: number;
  /** The problem type the answer must have: the word after the status, when it names one. */
  problem: string | undefined;
  headers: [string, string][];
}

/**
 * The curl lines of the documentation (EXAMPLE_FILES, in order), with the status, problem type
 * and headers their "# →" comment promises. They run against a fresh server, so the
 * documentation cannot drift from the code.
 */
function examples(): Example[] {
  return EXAMPLE_FILES.flatMap((file) =>
    [...readDoc(file).matchAll(/```sh\n([\s\S]*?)```/g)]
      .map((match) => match[1]!.replace(/\\\n\s*/g, ''))
      .flatMap((block) => block.split('\n'))
      .filter((line) => line.startsWith('curl '))
      .map((line) => {
        const [command, promise = ''] = line.split(/\s+# → /);
        const status = Number(/^\d{3}/.exec(promise)?.[0]);
        const word = /^\d{3} ([a-z][a-z-]*[a-z])/.exec(promise)?.[1];
        const problem = word !== undefined && Object.hasOwn(PROBLEM_TYPES, word) ? word : undefined;
        const headers = [...promise.matchAll(/([A-Z][A-Za-z-]+): ([^…]+?)(?=\s+[a-z]|$)/g)].map(
          (match): [string, string] => [match[1]!, match[2]!.trim()],
        );
        return { file, command: command!.trim(), status, problem, headers };
      }),
  );
}

/** The problems the documentation shows whole: ```json blocks whose object has a problem type. */
function shownProblems(): Record<string, unknown>[] {
  return EXAMPLE_FILES.flatMap((file) => [...readDoc(file).matchAll(/```json\n([\s\S]*?)```/g)])
    .map((match) => {
      try {
        return JSON.parse(match[1]!) as Record<string, unknown>;
      } catch {
        return undefined;
      }
    })
    .filter(
      (shown): shown is Record<string, unknown> =>
        typeof shown?.type === 'string' && shown.type.startsWith('/problems/'),
    );
}

describe('documentation examples (README and docs/)', () => {
  let server: RunningServer;
  let folder: string;
  let provider: FakeOpenMeteo;
  beforeAll(async () => {
    // The weather examples with a provider run against a local server playing Open-Meteo.
    provider = await startFakeOpenMeteo();
    // The shipped limits, as after npm start (the helpers turn them off for other tests).
    const shippedLimits = Object.fromEntries(Object.keys(NO_RATE_LIMITS).map((name) => [name, '']));
    server = await startServer({
      env: {
        ...shippedLimits,
        ROWI_WEATHER_PROVIDER: 'open-meteo',
        ROWI_WEATHER_URL: provider.url,
        // The backup examples of docs/operations.md take a real backup.
        ROWI_BACKUP_DIR: tempFolder('readme-backups'),
      },
    });
    folder = tempFolder('readme');
  });
  afterAll(async () => {
    await server.stop();
    await provider.close();
  });

  it('every curl example has a promised status, and every error example the problem type it gets', () => {
    const all = examples();
    expect(all.length).toBeGreaterThanOrEqual(20);
    expect(all.filter((example) => Number.isNaN(example.status))).toEqual([]);
    // The token endpoint's errors are OAuth's (RFC 6749 §5.2), not problems; they show their error code instead.
    const unnamed = all.filter(
      (example) => example.status >= 400 && example.problem === undefined && !example.command.includes('/oauth/token'),
    );
    expect(unnamed.map((example) => `${example.file}: ${example.command}`)).toEqual([]);
  });

  it('every curl example, run in order against a fresh server, gets the status, problem type and headers it promises; a problem shown in full is what the example before it got', async () => {
    /** The JSON problem the first error example of each type got. */
    const answered = new Map<string, Record<string, unknown>>();
    for (const example of examples()) {
      const command = example.command.replaceAll(DOCUMENTED_ORIGIN, server.baseUrl);
      const { stdout } = await run('sh', ['-c', command], {
        cwd: folder,
        env: { ...process.env, ROWI_KEY: server.adminKey },
      });
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(stdout)?.[1] ?? stdout.trim());
      expect(status, `${example.file}: ${example.command}\n${stdout}`).toBe(example.status);
      if (example.problem !== undefined) {
        expect(stdout, `${example.file}: ${example.command}`).toContain(`/problems/${example.problem}`);
        const body = stdout.slice(stdout.indexOf('\r\n\r\n') + 4);
        if (body.startsWith('{') && !answered.has(example.problem))
          answered.set(example.problem, JSON.parse(body) as Record<string, unknown>);
      }
      for (const [name, value] of example.headers) {
        const header = new RegExp(`^${name}: (.*)\\r?$`, 'im').exec(stdout);
        expect(header?.[1]?.trim(), `${name} of ${example.command}\n${stdout}`).toBe(value);
      }
    }
    // The problems the documentation shows in full (a ```json block with a problem type) are what rowi answered.
    for (const shown of shownProblems()) {
      const { request_id: _requestId, ...documented } = shown;
      const type = String(documented.type).replace('/problems/', '');
      expect(answered.get(type), `an example answering ${type}, shown in the documentation`).toMatchObject(documented);
    }
  }, 120_000); // every guide's curl lines (a few hundred requests, servers started on the way): longer than one test's usual 30 s on a busy machine
});
