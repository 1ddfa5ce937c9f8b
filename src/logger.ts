import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

/**
 * One pino logger for the process: JSON lines on stdout. Credentials never belong in logs;
 * the paths below are removed wherever they appear.
 */
export function createLogger(config: Pick<Config, 'logLevel'>): Logger {
  return pino({
    level: config.logLevel,
    base: { service: 'rowi' },
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'headers.authorization', 'headers["x-api-key"]'],
      remove: true,
    },
  });
}
