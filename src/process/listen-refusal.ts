import { ConfigError } from '../config/config-error.js';

/**
 * Why the port could not be opened, as a bad setting is said (one line, exit code 2, no stack):
 * the port is in use (another rowi, another program), a port below 1024 without the right to it,
 * or a host that is no address of this machine. Anything else is returned as it is. A module of its
 * own so that the lean primary of --workers (process/cluster.ts) loads nothing more with it.
 */
export function listenRefusal(error: unknown, host: string, port: number): unknown {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch ((error as NodeJS.ErrnoException | undefined)?.code) {
    case 'EADDRINUSE':
      return new ConfigError(
        `port ${port} is in use (${where}): another program, or another rowi, listens there. Stop it, or choose another port with ROWI_PORT or --port (ROWI_PORT=3000 npm start, or npm start -- --port 3000)`,
      );
    case 'EACCES':
      return new ConfigError(
        `port ${port} may not be opened by this user (${where}; ports below 1024 need privileges): choose another with ROWI_PORT or --port`,
      );
    case 'EADDRNOTAVAIL':
      return new ConfigError(
        `${host} is no address of this machine, so rowi cannot listen on ${where}: choose another with ROWI_HOST or --host`,
      );
    default:
      return error;
  }
}
