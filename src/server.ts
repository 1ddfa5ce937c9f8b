import closeWithGrace from 'close-with-grace';
import type { AddressInfo } from 'node:net';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { openStorage } from './db/connect.js';
import { migrateToLatest } from './db/migrate.js';
import { createLogger } from './logger.js';
import { ensureFirstAdmin } from './resources/callers/callers.service.js';

/**
 * `rowi serve`: open and migrate the database, build the app, listen, and shut down gracefully
 * on SIGTERM/SIGINT — stop accepting, let in-flight requests finish within the shutdown timeout,
 * close the database, exit 0 (1 if the timeout had to cut requests off).
 */
export async function serve(config: Config): Promise<void> {
  const logger = createLogger(config);
  const storage = await openStorage(config, logger);
  const migrations = await migrateToLatest(storage.db);
  if (migrations.applied.length > 0) logger.info({ applied: migrations.applied }, 'database migrated');

  let app;
  try {
    app = await buildApp({ config, storage, logger });
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await app?.close();
    await storage.close();
    throw error;
  }
  // Only once rowi is listening, so that a start that fails (a bad certificate, a port in use)
  // cannot create the first admin and lose its key.
  const firstAdmin = await ensureFirstAdmin(storage.db);

  const origin = publicOrigin(app.server.address() as AddressInfo, config.tlsCert === '' ? 'http' : 'https');
  // The OAuth issuer is the listen address unless ROWI_PUBLIC_URL says otherwise; only now is the port known.
  if (config.publicUrl === '') app.auth.tokens.issuer = origin;
  const baseUrl = `${origin}/v1`;
  logger.info({ url: baseUrl, storage: storage.describe }, `listening on ${baseUrl}`);
  // The first admin key goes to the terminal once, never to the log.
  process.stderr.write(
    `\nrowi is serving ${baseUrl} (${storage.describe})\n` +
      (firstAdmin
        ? `\nThe database was empty, so rowi created the admin caller "${firstAdmin.caller.name}". Its API key, shown only this once:\n\n` +
          `  ROWI_KEY=${firstAdmin.key}\n\n` +
          `Keep it somewhere safe; create callers for your systems with it (README: Security).\n`
        : '') +
      `\nTry it (with ROWI_KEY set to an API key):\n` +
      `  curl -s -X POST ${baseUrl}/users -H "X-API-Key: $ROWI_KEY" -H 'Content-Type: application/json' -d '{"name":"Ada Lovelace","email":"ada@example.com"}'\n` +
      `  curl -s ${baseUrl}/users -H "X-API-Key: $ROWI_KEY"\n` +
      `API description: ${baseUrl}/openapi.json\n\n`,
  );

  closeWithGrace(
    { delay: config.shutdownTimeout, logger: { error: (message: unknown) => logger.error(message) } },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'fatal error, shutting down');
      else logger.info({ signal }, 'shutting down: finishing in-flight requests');
      await app.close();
      await storage.close();
      logger.info('stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  );
}

/** The address to tell people: a wildcard listen address is reachable on loopback. */
function publicOrigin(address: AddressInfo, scheme: 'http' | 'https'): string {
  const host = address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  return `${scheme}://${address.family === 'IPv6' || host.includes(':') ? `[${host}]` : host}:${address.port}`;
}
