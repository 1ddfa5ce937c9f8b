import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { request, type IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { join, resolve } from 'node:path';
import { describeSettings } from '../../src/config/config.js';
import { NO_RATE_LIMITS } from './rate-limits.js';
import { createTestDatabase } from './database.js';
import { tempFolder } from './temp.js';

/** The built CLI; `npm test` builds before it runs the tests. */
export const CLI = resolve(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '../../dist/rowi/cli.js');

export interface RunningServer {
  child: ChildProcessWithoutNullStreams;
  baseUrl: string;
  /** The SQLite file (empty on PostgreSQL). */
  dataFile: string;
  /** The environment that selects this server's database: give it to another server or to runCli to share it. */
  database: Record<string, string>;
  stdout: () => string;
  stderr: () => string;
  /**
   * The admin caller's API key: the one this start printed on stderr (`  ROWI_KEY=rowi_…`, only
   * on an empty database), else the one passed as options.adminKey (a restart on an existing file).
   */
  adminKey: string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A data file in a folder of its own, inside the test run's temporary root. */
export function tempDataFile(): string {
  return join(tempFolder('server'), 'rowi.db');
}

export interface StartOptions {
  /** A SQLite file (always SQLite, whatever the run's backend). */
  dataFile?: string;
  /** The database of another server (its `database`); default: a new one of the run's backend. */
  database?: Record<string, string>;
  /** Settings of this server; '' leaves one out (the default, not this helper's). */
  env?: Record<string, string>;
  args?: string[];
  timeoutMs?: number;
  /** The admin key of an earlier start on the same dataFile: rowi prints a key only when the database is empty. */
  adminKey?: string;
}

/** The line of the stderr banner that carries the first admin's key. */
const ADMIN_KEY_LINE = /^ {2}ROWI_KEY=(rowi_\S+)$/m;

/** The last line of the banner `rowi serve` writes to stderr once it listens (after the key, if any). */
const BANNER_END = /^API description: \S+\n/m;

/**
 * Starts `rowi serve` as a child process on a free loopback port and waits until it has logged
 * "listening" (stdout) and written its whole banner, which carries the first admin key (stderr):
 * the two streams are written separately (the log asynchronously), so either may arrive first.
 */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const database =
    options.database ??
    (options.dataFile !== undefined ? { ROWI_DATA: options.dataFile } : (await createTestDatabase()).env);
  const dataFile = database.ROWI_DATA ?? '';
  // One process unless a test asks for workers: the default (one per core) is for production.
  const env = {
    ...inherited(),
    ROWI_HOST: '127.0.0.1',
    ROWI_PORT: '0',
    ROWI_WORKERS: '1',
    ROWI_LOG_LEVEL: 'info',
    ...NO_RATE_LIMITS,
    ...database,
    ...options.env,
  };
  const child = spawn(process.execPath, [CLI, 'serve', ...(options.args ?? [])], {
    // A setting a test gives as '' is left out: the shipped default instead of this helper's.
    env: Object.fromEntries(Object.entries(env).filter(([, value]) => value !== '')),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolveExit) => child.on('exit', (code) => resolveExit(code)));
  const baseUrl = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL'); // a server that failed to start is not left running
      reject(new Error(`rowi did not start within ${options.timeoutMs ?? 15_000} ms:\n${out}\n${err}`));
    }, options.timeoutMs ?? 15_000);
    const look = () => {
      const match = /"msg":"listening on (https?:\/\/[^"]+)\/v1"/.exec(out);
      if (match && BANNER_END.test(err)) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`rowi exited with ${code} before listening:\n${out}\n${err}`));
    });
  });
  const adminKey = ADMIN_KEY_LINE.exec(err)?.[1] ?? options.adminKey;
  if (adminKey === undefined) {
    child.kill('SIGKILL');
    throw new Error(`rowi printed no ROWI_KEY (the database was not empty) and no options.adminKey was given:\n${err}`);
  }
  return {
    child,
    baseUrl,
    dataFile,
    database,
    stdout: () => out,
    stderr: () => err,
    adminKey,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

const SETTINGS = new Set(describeSettings().map((setting) => setting.env));

/**
 * The test run's environment without rowi's settings, so that a server gets those its test gives
 * it and no other (a developer's shell may have some). The tools' own (ROWI_TEST_BACKEND and the
 * like) stay: rowi must start with them set.
 */
function inherited(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !SETTINGS.has(name)));
}

/**
 * Runs the CLI to completion (for commands that exit) and collects its output. It runs in a folder
 * of its own, so that a command given no ROWI_DATA opens the default ./data/rowi.db there, never
 * the checkout's.
 */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: tempFolder('cli'),
      env: { ...inherited(), ROWI_LOG_LEVEL: 'silent', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`rowi ${args.join(' ')} did not exit within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

/**
 * Servers a test file starts, so that none outlives its test: `afterEach(servers.killAll)`
 * kills (SIGKILL) whatever a test left running, a failed one included. `defaults` are the
 * file's own options (its settings), under those of each start.
 */
export function serverPool(defaults: StartOptions = {}) {
  const running: RunningServer[] = [];
  return {
    async serve(options: StartOptions = {}): Promise<RunningServer> {
      const server = await startServer({ ...defaults, ...options, env: { ...defaults.env, ...options.env } });
      running.push(server);
      return server;
    },
    killAll(): void {
      for (const server of running.splice(0))
        if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    },
  };
}

/** One request to a running server as its admin: a JSON body in (of `contentType`), the status and the parsed JSON out. */
export async function callServer(
  server: Pick<RunningServer, 'baseUrl' | 'adminKey'>,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
) {
  const reply = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { 'x-api-key': server.adminKey, ...(body === undefined ? {} : { 'content-type': contentType }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await reply.text();
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: reply.status, json: (text === '' ? undefined : JSON.parse(text)) as any };
}

/**
 * The workers (their numbers in the log of `rowi serve --workers N`) that answered a request with
 * `status`; `request`: only requests of that method and path (`POST /v1/orders`).
 */
export function workersThatAnswered(server: RunningServer, status: number, request?: string): Set<number> {
  const workers = new Set<number>();
  for (const line of server.stdout().split('\n')) {
    if (!line.includes('"msg":"request completed"') || !line.includes(`"status":${status}`)) continue;
    const entry = JSON.parse(line) as { worker: number; method: string; path: string };
    if (request === undefined || `${entry.method} ${entry.path}` === request) workers.add(entry.worker);
  }
  return workers;
}

/**
 * One request on a connection of its own (no keep-alive: the primary of `rowi serve --workers N`
 * deals each connection to the next worker); `body` a text or a stream (a file).
 */
export function sendAlone(
  server: Pick<RunningServer, 'baseUrl'>,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Readable,
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(new URL(path, server.baseUrl), { method, headers, agent: false }, (reply) => {
      let text = '';
      reply.setEncoding('utf8');
      reply.on('data', (chunk: string) => (text += chunk));
      reply.on('end', () => resolve({ status: reply.statusCode ?? 0, headers: reply.headers, text }));
    });
    outgoing.on('error', reject);
    if (body === undefined || typeof body === 'string') outgoing.end(body);
    else body.pipe(outgoing);
  });
}
