#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CONFIG_FLAGS, ConfigError, describeSettings, loadConfig } from './config.js';
import { migrateToLatest } from './db/migrate.js';
import { openStorage, serve } from './server.js';
import { VERSION } from './version.js';

const USAGE = `rowi ${VERSION}: a Resource-Oriented Web Interface

Usage:
  rowi serve [flags]     serve the API (creates and migrates the database on first start)
  rowi migrate [flags]   bring the database up to date and exit
  rowi --version | --help

Settings (flag, environment variable, default):
${describeSettings()
  .map((setting) => `  ${(setting.flag ?? '').padEnd(14)} ${setting.env.padEnd(24)} ${String(setting.default).padEnd(16)} ${setting.description}`)
  .join('\n')}

A bad setting stops rowi before it listens, with exit code 2.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  if (command === '--version' || command === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (command !== 'serve' && command !== 'migrate') return usageError(`unknown command "${command}"`);

  let flags: Record<string, string | boolean | undefined>;
  try {
    flags = parseArgs({ args: rest, options: { ...CONFIG_FLAGS, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }).values;
  } catch (error) {
    return usageError((error as Error).message);
  }
  if (flags.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }

  const config = loadConfig(process.env, flags as Record<string, string | undefined>);
  if (command === 'serve') {
    await serve(config);
    return -1; // keeps running until a signal
  }
  const storage = openStorage(config);
  try {
    const { applied } = await migrateToLatest(storage.db);
    process.stdout.write(applied.length > 0 ? `applied ${applied.join(', ')}\n` : 'database is up to date\n');
  } finally {
    await storage.close();
  }
  return 0;
}

function usageError(message: string): number {
  process.stderr.write(`rowi: ${message}\nRun "rowi --help" for usage.\n`);
  return 2;
}

main(process.argv.slice(2)).then(
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
