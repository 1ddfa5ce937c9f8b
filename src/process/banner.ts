import type { Logger } from 'pino';

/** The first admin caller, created on an empty database: its name and its API key. */
export interface FirstAdmin {
  name: string;
  key: string;
}

/**
 * Logs "listening" once, and writes the banner, with the first admin's key when one was just
 * created. A module of its own: the primary of `--workers` writes it (its preparer created the admin).
 */
export function announceListening(
  logger: Pick<Logger, 'info'>,
  origin: string,
  storage: string,
  processes: string,
  firstAdmin: FirstAdmin | undefined,
): void {
  const baseUrl = `${origin}/v1`;
  logger.info({ url: baseUrl, storage, processes }, `listening on ${baseUrl}`);
  // The first admin key goes to the terminal once, never to the log.
  process.stderr.write(
    `\nrowi is serving ${baseUrl} (${storage}, ${processes})\n` +
      (firstAdmin
        ? `\nThe database was empty, so rowi created the admin caller "${firstAdmin.name}". Its API key, shown only this once:\n\n` +
          `  ROWI_KEY=${firstAdmin.key}\n\n` +
          `Keep it somewhere safe; create callers for your systems with it (docs/security.md).\n`
        : '') +
      `\nTry it (with ROWI_KEY set to an API key):\n` +
      `  curl -s -X POST ${baseUrl}/users -H "X-API-Key: $ROWI_KEY" -H 'Content-Type: application/json' -d '{"name":"Ada Lovelace","email":"ada@example.com"}'\n` +
      `  curl -s ${baseUrl}/users -H "X-API-Key: $ROWI_KEY"\n` +
      `API description: ${baseUrl}/openapi.json\n\n`,
  );
}
