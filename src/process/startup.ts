import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { openStorage, type Storage } from '../db/connect.js';
import { checkSqliteFile, holdsData } from '../db/sqlite-check.js';
import { createLogger } from '../observability/logger.js';
import { migrateStorage, type MigrationOutcome } from '../db/migrate.js';
import { describeAssignedOwners } from '../db/migrations/0013-owners.js';
import { ensureSigningKey } from '../auth/signing-keys.js';
import { ensureFirstAdmin } from '../resources/callers/api-keys.service.js';
import { listenOrigin } from '../http/transport.js';
import { announceListening, type FirstAdmin } from './banner.js';
import { listenRefusal } from './listen-refusal.js';

export { CLOSING_MARGIN_MS } from './closing.js';

/**
 * The configured database, opened, and on SQLite checked for damage before anything is written to
 * it (db/sqlite-check.ts: exit code 2 when it is damaged). Damage the check finds once rowi runs
 * goes to `onLateDamage`; by default this process takes it as damage a request met.
 */
export async function openCheckedStorage(
  config: Config,
  logger: Logger,
  onLateDamage?: (detail: string, storage: Storage) => void,
  onCheckGoesOn?: (checkEnds: Promise<void>) => void,
): Promise<Storage> {
  // A file that is new (opening it makes it) has nothing to check: no process is started for it.
  const existed = holdsData(config.data);
  const storage = await openStorage(config, logger);
  try {
    const checkEnds = existed
      ? await checkSqliteFile(config, logger, (detail) =>
          (onLateDamage ?? ((late) => storage.corruption.report(late)))(detail, storage),
        )
      : undefined;
    if (checkEnds !== undefined) onCheckGoesOn?.(checkEnds);
  } catch (error) {
    await storage.close();
    throw error;
  }
  return storage;
}

/** The steps every way of serving shares (one process, or a primary and its workers). */
export async function migrate(storage: Storage, logger: Pick<Logger, 'info'>): Promise<void> {
  const migrations = await prepareDatabase(storage);
  if (migrations.applied.length > 0) logger.info({ applied: migrations.applied }, 'database migrated');
  // Migration 0013 gives the records made before owners existed an owner (docs/access.md): say so
  // where operators look, when there were any (a new, empty database had none to give).
  if (!migrations.applied.includes('0013-owners')) return;
  const { records, owner } = await describeAssignedOwners(storage.db);
  if (records === 0) return;
  const made = `${records} ${records === 1 ? 'record' : 'records'} (users, items, orders) made before owners existed`;
  logger.info(
    { records, owner },
    owner === null
      ? `${made} have no owner, as there was no admin caller: callers that see all records see them, those that see only their own do not`
      : `${made} now belong to the first admin caller (id ${owner})`,
  );
}

/** Brings the database up to date and makes what rowi needs from its first request: a signing key. */
export async function prepareDatabase(storage: Storage): Promise<MigrationOutcome> {
  const migrations = await migrateStorage(storage);
  await ensureSigningKey(storage.db);
  return migrations;
}

export async function listen(
  config: Config,
  storage: Storage,
  logger: Logger,
): Promise<{ app: FastifyInstance; origin: string }> {
  const app = await started(config, storage, logger, undefined, (built) =>
    built.listen({ host: config.host, port: config.port }).catch((error: unknown) => {
      throw listenRefusal(error, config.host, config.port);
    }),
  );
  const origin = listenOrigin(config, app.server.address() as AddressInfo);
  setOrigin(app, origin);
  return { app, origin };
}

/**
 * A worker of `rowi serve --workers`: the app, taking the connections its primary hands over
 * (cluster.ts) rather than accepting any. It listens on a Unix socket of its own that nobody
 * connects to, so that Node's HTTP server runs as it does when listening: its header and request
 * time-outs are armed when it starts listening. The socket is removed when the app closes.
 */
export async function serveHandedConnections(
  config: Config,
  storage: Storage,
  logger: Logger,
  collectMetrics: () => Promise<string>,
): Promise<FastifyInstance> {
  const folder = mkdtempSync(join(tmpdir(), 'rowi-worker-'));
  return started(config, storage, logger, collectMetrics, async (built) => {
    built.addHook('onClose', async () => rmSync(folder, { recursive: true, force: true }));
    await built.listen({
      path: join(folder, 'unused.sock'),
      listenTextResolver: () => 'worker ready: it serves the connections the primary hands over',
    });
  });
}

/**
 * Once rowi listens, the listen origin is known (ROWI_PORT 0 picks the port then): the issuer of
 * its tokens becomes the public origin of that address (TokenService.useListenOrigin; the app was
 * built with the settings' address).
 */
export function setOrigin(app: FastifyInstance, listened: string): void {
  app.auth.tokens.useListenOrigin(listened);
}

/** The app, built and listening; a start that fails closes what it opened. */
async function started(
  config: Config,
  storage: Storage,
  logger: Logger,
  collectMetrics: (() => Promise<string>) | undefined,
  listenOn: (app: FastifyInstance) => Promise<unknown>,
): Promise<FastifyInstance> {
  let app;
  try {
    // Loaded here, not at the top: the primary of --workers imports this file and serves no routes.
    const [{ buildApp }, { APP_THREADS }] = await Promise.all([import('../app.js'), import('./threads.js')]);
    app = await buildApp({
      config,
      storage,
      logger,
      threads: APP_THREADS,
      ...(collectMetrics === undefined ? {} : { collectMetrics }),
    });
    await listenOn(app);
    return app;
  } catch (error) {
    await app?.close();
    await storage.close();
    throw error;
  }
}

/** Creates the first admin on an empty database, logs "listening" once, and writes the banner. */
export async function announce(storage: Storage, logger: Logger, origin: string, processes: string): Promise<void> {
  announceListening(logger, origin, storage.describe, processes, await createFirstAdmin(storage));
}

/** The first admin caller and its key, on an empty database; undefined when there are callers. */
export async function createFirstAdmin(storage: Storage): Promise<FirstAdmin | undefined> {
  const created = await ensureFirstAdmin(storage.db);
  return created && { name: created.caller.name, key: created.key };
}

/**
 * The OpenAPI document this version serves (`rowi openapi`), from the app built on an empty
 * in-memory database: what it documents depends on the code and the settings (ROWI_PUBLIC_URL),
 * never on data.
 */
export async function apiDocument(config: Config): Promise<unknown> {
  const memory = { ...config, data: ':memory:', databaseUrl: '', logLevel: 'silent' } as Config;
  const logger = createLogger(memory, 2);
  const storage = await openStorage(memory, logger);
  try {
    await prepareDatabase(storage);
    const { buildApp } = await import('../app.js');
    const app = await buildApp({ config: memory, storage, logger });
    await app.ready();
    const document = app.swagger();
    await app.close();
    return document;
  } finally {
    await storage.close();
  }
}
