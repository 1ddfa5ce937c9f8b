import { Writable } from 'node:stream';
import pino from 'pino';

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** A logger at `level` whose lines are kept, parsed, in `log`. */
export function keptLog(level: pino.LevelWithSilent = 'warn'): { log: LogLine[]; logger: pino.Logger } {
  const log: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) log.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return { log, logger: pino({ level }, sink) };
}
