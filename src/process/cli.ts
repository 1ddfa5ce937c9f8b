#!/usr/bin/env node
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { ConfigError } from '../config/config-error.js';
import { PREPARER_ENV } from './preparer.js';

/**
 * The `rowi` command. `rowi serve` with more than one worker process starts lean: this process
 * becomes the primary, which only deals connections to its workers, and loads none of what serves
 * or checks settings (process/cluster.ts: its preparer does that); every other command, and every
 * worker, loads the whole of rowi (process/commands.ts).
 */
function servesWithWorkers(argv: string[], env: NodeJS.ProcessEnv): boolean {
  if (!cluster.isPrimary || env[PREPARER_ENV] !== undefined || argv[0] !== 'serve') return false;
  if (argv.some((arg) => arg === '-h' || arg === '--help')) return false;
  let raw = env.ROWI_WORKERS;
  argv.forEach((arg, index) => {
    if (arg === '--workers') raw = argv[index + 1];
    else if (arg.startsWith('--workers=')) raw = arg.slice('--workers='.length);
  });
  // Only a count decides here (as the settings read one); anything else is for their check to refuse.
  raw = (raw ?? '0').trim();
  if (!/^\d{1,15}$/.test(raw)) return false;
  const count = Number(raw);
  return (count === 0 ? availableParallelism() : count) > 1;
}

async function run(argv: string[]): Promise<number> {
  if (servesWithWorkers(argv, process.env)) {
    const { serveWithWorkers } = await import('./cluster.js');
    const code = await serveWithWorkers();
    if (code !== undefined) return code;
  }
  const { runCommand } = await import('./commands.js');
  return runCommand(argv);
}

run(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof ConfigError) {
      process.stderr.write(`rowi: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`rowi: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
