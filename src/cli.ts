#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CONFIG_FLAGS, ConfigError, describeSettings, loadConfig, plainText } from './config.js';
import { ROLES } from './auth/policy.js';
import { TokenService } from './auth/tokens.js';
import type { Db, Role } from './db/database.js';
import { AppError } from './errors.js';
import { CALLER_NAME_PATTERN } from './resources/callers/callers.schema.js';
import { createApiKey } from './resources/callers/api-keys.service.js';
import { createCaller } from './resources/callers/callers.service.js';
import { openStorage } from './db/connect.js';
import { createLogger } from './logger.js';
import { apiDocument, prepareDatabase } from './listen.js';
import { serve } from './server.js';
import { VERSION } from './version.js';
import { unitOfWork } from './db/unit-of-work.js';

const USAGE = `rowi ${VERSION}: a Resource-Oriented Web Interface

Usage:
  rowi serve [flags]     serve the API (creates and migrates the database on first start)
  rowi migrate [flags]   bring the database up to date and exit
  rowi callers create --name NAME --role reader|editor|admin [flags]
                         create a caller; prints its new API key, alone, once
  rowi signing-keys rotate [flags]
                         retire the key that signs access tokens and make a new one
                         (the old public key stays published until its tokens expire)
  rowi openapi [flags]   print the OpenAPI document (JSON) this version serves, without a database
  rowi --version | --help

Settings (flag, environment variable, default):
${describeSettings()
  .map((setting) => `  ${(setting.flag ?? '').padEnd(14)} ${setting.env.padEnd(24)} ${(setting.defaultText ?? String(setting.default)).padEnd(16)} ${plainText(setting.description)}`)
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
  if (!['serve', 'migrate', 'callers', 'signing-keys', 'openapi'].includes(command)) return usageError(`unknown command "${command}"`);

  let flags: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values: flags, positionals } = parseArgs({
      args: rest,
      options: { ...CONFIG_FLAGS, ...(command === 'callers' ? CALLER_FLAGS : {}), help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: command === 'callers' || command === 'signing-keys',
    }));
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
  if (command === 'openapi') {
    process.stdout.write(`${JSON.stringify(await apiDocument(config), null, 2)}\n`);
    return 0;
  }
  if (command === 'callers' && positionals.join(' ') !== 'create') return usageError('the callers command is: rowi callers create --name NAME --role ROLE');
  if (command === 'signing-keys' && positionals.join(' ') !== 'rotate') return usageError('the signing-keys command is: rowi signing-keys rotate');
  if (command === 'callers' && (typeof flags.name !== 'string' || typeof flags.role !== 'string')) return usageError('callers create needs --name and --role');
  // Commands other than serve keep stdout for their result (a new key), so their log goes to stderr.
  const storage = await openStorage(config, createLogger(config, 2));
  try {
    const { applied } = await prepareDatabase(storage);
    if (command === 'migrate') {
      process.stdout.write(applied.length > 0 ? `applied ${applied.join(', ')}\n` : 'database is up to date\n');
    } else if (command === 'callers') {
      return await createCallerCommand(storage.db, flags.name as string, flags.role as string);
    } else {
      const kid = await new TokenService(storage.db, config, config.publicUrl, storage.signals).rotate();
      process.stdout.write(`${kid}\n`);
    }
  } finally {
    await storage.close();
  }
  return 0;
}

const CALLER_FLAGS = { name: { type: 'string' as const }, role: { type: 'string' as const } };

/** Prints the new key alone on stdout, so scripts can capture it: ROWI_KEY=$(rowi callers create …). */
async function createCallerCommand(db: Db, name: string, role: string): Promise<number> {
  if (!(ROLES as readonly string[]).includes(role)) return usageError(`--role must be one of ${ROLES.join(', ')}`);
  if (name.length > 64 || !new RegExp(CALLER_NAME_PATTERN).test(name)) {
    return usageError('--name must be 1–64 lower-case letters, digits, dots, hyphens or underscores, starting with a letter or digit');
  }
  try {
    const key = await unitOfWork(db, async (trx) => {
      const caller = await createCaller(trx, { name, role: role as Role });
      return (await createApiKey(trx, caller.id, { description: 'created by rowi callers create' })).key;
    });
    process.stdout.write(`${key}\n`);
    return 0;
  } catch (error) {
    if (error instanceof AppError) {
      process.stderr.write(`rowi: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
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
