import pino, { type Logger } from 'pino';
import type { Config } from '../config/config.js';

/**
 * One pino logger for the process: JSON lines on stdout. Credentials never belong in logs;
 * the paths below are removed wherever they appear.
 *
 * Lines are written asynchronously: those logged while a write is in flight go out together in
 * the next one, instead of one blocking write(2) per line (with an access-log line per request
 * that was ~1.5 µs of CPU per request, a twentieth of a read). pino flushes what is pending when
 * the process exits, and process/serve.ts flushes after the last line of a shutdown.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, fd: 1 | 2 = 1): Logger {
  return pino(loggerOptions(config.logLevel), pino.destination({ dest: fd, sync: false }));
}

/** The logger's options, whatever it writes to. */
export function loggerOptions(level: string): pino.LoggerOptions {
  return {
    level,
    base: { service: 'rowi' },
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-api-key"]',
        'req.headers.cookie',
        'headers.authorization',
        'headers["x-api-key"]',
      ],
      remove: true,
    },
    serializers: { err: serializeError },
  };
}

/**
 * An error as a log line holds it: its type, message, stack and the plain facts drivers attach
 * (code, errno, syscall, address, PostgreSQL's severity, detail, constraint…), and its cause the
 * same way; never an object a driver hangs on it (pg's pool adds the whole client: its prepared
 * SQL, buffers and the server's cancel key, ~20 KB a line).
 */
export function serializeError(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error)) return error;
  const serialized = pino.stdSerializers.err(error) as unknown as Record<string, unknown>;
  const kept: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(serialized)) {
    if (name === 'stack' && typeof value === 'string') kept[name] = shortStack(value);
    else if (value === null || typeof value !== 'object') kept[name] = value;
    else if (name === 'cause' && depth < 2)
      kept[name] = serializeError((error as { cause?: unknown }).cause, depth + 1);
  }
  return kept;
}

/** Frames of a stack kept: where it was thrown and how it got there; pg repeats the whole async stack after them. */
const STACK_FRAMES = 8;

function shortStack(stack: string): string {
  const lines = stack.split('\n');
  const firstFrame = lines.findIndex((line) => line.startsWith('    at '));
  if (firstFrame === -1 || lines.length <= firstFrame + STACK_FRAMES) return stack;
  return [...lines.slice(0, firstFrame + STACK_FRAMES), `    … ${lines.length - firstFrame - STACK_FRAMES} more`].join(
    '\n',
  );
}

/** A fault in a few words, for the message of its log line: "read ECONNRESET", "terminating connection due to administrator command (57P01)". */
export function faultOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const message = error.message.split('\n')[0]!.slice(0, 200) || error.name;
  return typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message;
}
