import { parseArgs } from 'node:util';
import cluster from 'node:cluster';
import {
  CONFIG_FLAGS,
  describeSettings,
  describeUnknown,
  loadConfig,
  nearestName,
  plainText,
  unknownSettings,
  type Config,
} from '../config/config.js';
import { damagedAtStart } from '../db/corruption.js';
import { isCorruption } from '../db/driver-errors.js';
import type { Db, Role } from '../db/database.js';
import { AppError } from '../errors.js';
import { createLogger } from '../observability/logger.js';
import { apiDocument, openCheckedStorage, prepareDatabase } from './startup.js';
import { serve } from './serve.js';
import { VERSION } from '../version.js';

const USAGE = `rowi ${VERSION}: a Resource-Oriented Web Interface

Usage:
  rowi serve [flags]     serve the API (creates and migrates the database on first start)
  rowi migrate [flags]   bring the database up to date and exit
  rowi callers create --name NAME --role reader|editor|admin|channel [flags]
                         create a caller; prints its new API key, alone, once
  rowi signing-keys rotate [flags]
                         retire the key that signs access tokens and make a new one
                         (the old public key stays published until its tokens expire)
  rowi backup FILE [flags]
                         copy the SQLite database to FILE, checked, while rowi serves it
                         (FILE.json beside it records its SHA-256); PostgreSQL has its own tools
  rowi restore FILE [flags]
                         put the backup FILE in place of the SQLite database (refused while a
                         server uses it), keeping the current one aside, and migrate it
  rowi openapi [flags]   print the OpenAPI document (JSON) this version serves, without a database
  rowi --version | --help

Settings (flag, environment variable, default):
${describeSettings()
  .map(
    (setting) =>
      `  ${(setting.flag ?? '').padEnd(14)} ${setting.env.padEnd(24)} ${(setting.defaultText ?? String(setting.default)).padEnd(16)} ${plainText(setting.description)}`,
  )
  .join('\n')}

A bad setting stops rowi before it does anything, with exit code 2; so do an empty one, a flag
given twice, and a ROWI_ variable that is no setting (ROWI_UNKNOWN_SETTINGS=warn lets it through).`;

/** `rowi COMMAND …`: what the command printed is its answer; the number, its exit code (-1: it keeps running). */
export async function runCommand(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  if (command === '--version' || command === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (!['serve', 'migrate', 'callers', 'signing-keys', 'openapi', 'backup', 'restore'].includes(command))
    return usageError(`unknown command "${command}"`);

  const options = {
    ...CONFIG_FLAGS,
    ...(command === 'callers' ? CALLER_FLAGS : {}),
    help: { type: 'boolean' as const, short: 'h' },
  };
  let flags: Record<string, string | boolean | undefined>;
  let positionals: string[];
  let tokens: { kind: string; name?: string }[];
  try {
    ({
      values: flags,
      positionals,
      tokens,
    } = parseArgs({
      args: rest,
      options,
      strict: true,
      allowPositionals: ['callers', 'signing-keys', 'backup', 'restore'].includes(command),
      tokens: true,
    }));
  } catch (error) {
    return usageError(flagError(error as Error & { code?: string }, Object.keys(options)));
  }
  if (flags.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  // parseArgs keeps the last of a repeated flag; two values for one setting are a mistake to say.
  const given = tokens.flatMap((token) => (token.kind === 'option' && token.name !== undefined ? [token.name] : []));
  const repeated = given.find((name, index) => given.indexOf(name) !== index);
  if (repeated !== undefined) return usageError(`--${repeated} is given more than once: give it once`);

  const config = loadConfig(process.env, flags as Record<string, string | undefined>);
  // A worker of `rowi serve --workers` reads the same environment: the primary has said it.
  const unknown = unknownSettings(process.env);
  if (unknown.length > 0 && !cluster.isWorker) {
    process.stderr.write(
      `rowi: warning: ${unknown.map(describeUnknown).join('; ')}: not a setting of rowi, ignored (ROWI_UNKNOWN_SETTINGS=warn)\n`,
    );
  }
  try {
    return await run(command, config, flags, positionals);
  } catch (error) {
    // A command, or a start, that meets a damaged database stops as the start's check would.
    throw isCorruption(error) ? damagedAtStart(config, error) : error;
  }
}

async function run(
  command: string,
  config: Config,
  flags: Record<string, string | boolean | undefined>,
  positionals: string[],
): Promise<number> {
  if (command === 'serve') {
    await serve(config);
    return -1; // keeps running until a signal
  }
  if (command === 'openapi') {
    process.stdout.write(`${JSON.stringify(await apiDocument(config), null, 2)}\n`);
    return 0;
  }
  if (command === 'backup' || command === 'restore') {
    if (positionals.length !== 1) return usageError(`the ${command} command is: rowi ${command} FILE`);
    return backupCommand(command, config, positionals[0]!);
  }
  if (command === 'callers' && positionals.join(' ') !== 'create')
    return usageError('the callers command is: rowi callers create --name NAME --role ROLE');
  if (command === 'signing-keys' && positionals.join(' ') !== 'rotate')
    return usageError('the signing-keys command is: rowi signing-keys rotate');
  if (command === 'callers' && (typeof flags.name !== 'string' || typeof flags.role !== 'string'))
    return usageError('callers create needs --name and --role');
  // Commands other than serve keep stdout for their result (a new key), so their log goes to stderr.
  const storage = await openCheckedStorage(config, createLogger(config, 2));
  try {
    const { applied } = await prepareDatabase(storage);
    if (command === 'migrate') {
      process.stdout.write(applied.length > 0 ? `applied ${applied.join(', ')}\n` : 'database is up to date\n');
    } else if (command === 'callers') {
      return await createCallerCommand(storage.db, flags.name as string, flags.role as string);
    } else {
      const { TokenService } = await import('../auth/tokens.js');
      const kid = await new TokenService(storage.db, config, storage.signals).rotate();
      process.stdout.write(`${kid}\n`);
    }
  } finally {
    await storage.close();
  }
  return 0;
}

const CALLER_FLAGS = { name: { type: 'string' as const }, role: { type: 'string' as const } };

/**
 * Prints the new key alone on stdout, so scripts can capture it: ROWI_KEY=$(rowi callers create …).
 * What only this command uses is loaded when it runs (`rowi serve`'s primary never needs it).
 */
async function createCallerCommand(db: Db, name: string, role: string): Promise<number> {
  const [{ ROLES }, { CALLER_NAME_PATTERN }, { createApiKey }, { createCaller }, { unitOfWork }] = await Promise.all([
    import('../auth/policy.js'),
    import('../resources/callers/callers.schema.js'),
    import('../resources/callers/api-keys.service.js'),
    import('../resources/callers/callers.service.js'),
    import('../db/unit-of-work.js'),
  ]);
  if (!(ROLES as readonly string[]).includes(role)) return usageError(`--role must be one of ${ROLES.join(', ')}`);
  if (name.length > 64 || !new RegExp(CALLER_NAME_PATTERN).test(name)) {
    return usageError(
      '--name must be 1–64 lower-case letters, digits, dots, hyphens or underscores, starting with a letter or digit',
    );
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

/**
 * `rowi backup FILE` beside a running server (its copy is a consistent snapshot), and `rowi
 * restore FILE` with no server on the database. Both print what they did; a refusal is exit code 1
 * with its reason, and nothing changed.
 */
async function backupCommand(command: 'backup' | 'restore', config: Config, file: string): Promise<number> {
  const [{ backupSqlite, restoreSqlite, BackupError }, { POSTGRES_BACKUPS }] = await Promise.all([
    import('../db/backup.js'),
    import('../db/backup-schedule.js'),
  ]);
  if (config.databaseUrl !== '') {
    process.stderr.write(`rowi: ${POSTGRES_BACKUPS}\n`);
    return 1;
  }
  if (config.data === ':memory:') return usageError(`ROWI_DATA=:memory: has no file to ${command}`);
  try {
    if (command === 'backup') {
      const manifest = await backupSqlite(config.data, file);
      process.stdout.write(`${JSON.stringify(manifest)}\n`);
      return 0;
    }
    const { MIGRATION_NAMES } = await import('../db/migrate.js');
    const { aside, checked } = await restoreSqlite(file, config.data, MIGRATION_NAMES);
    const storage = await openCheckedStorage(config, createLogger(config, 2));
    try {
      const { applied } = await prepareDatabase(storage);
      process.stdout.write(
        `${JSON.stringify({ restored: file, into: config.data, kept_aside: aside ?? null, sha256: checked.sha256, rows: checked.rows, migrated: applied })}\n`,
      );
    } finally {
      await storage.close();
    }
    return 0;
  } catch (error) {
    if (!(error instanceof BackupError)) throw error;
    process.stderr.write(`rowi: ${command} refused: ${error.message}\n`);
    return 1;
  }
}

/** parseArgs's refusal in rowi's words: an unknown flag with the nearest known one (`--prot`: did you mean --port?). */
function flagError(error: Error & { code?: string }, known: string[]): string {
  const unknown = /^Unknown option '(-{1,2}[^']+)'/.exec(error.message)?.[1];
  if (error.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || unknown === undefined) return error.message;
  const nearest = nearestName(
    unknown,
    known.map((name) => `--${name}`),
  );
  return `unknown flag ${unknown}${nearest === undefined ? '' : ` (did you mean ${nearest}?)`}`;
}

function usageError(message: string): number {
  process.stderr.write(`rowi: ${message}\nRun "rowi --help" for usage.\n`);
  return 2;
}
