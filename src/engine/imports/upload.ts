import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, BadRequestError, type FieldError } from '../../errors.js';
import type { DecodedBody } from '../../http/content-encoding.js';
import { HEADER_BYTES, otherSeparator, readCsvHeader } from './csv.js';
import type { ImportMediaType } from './rows.js';
import type { ImportTarget } from './target.js';

/**
 * An uploaded file, spooled to disk as it arrives (never held whole in memory) and checked on the
 * way for what makes the whole file unreadable: more than `maxBytes` (413 import-too-large), a
 * byte sequence that is not UTF-8, a NUL byte, nothing in it, and (CSV) a header that does not
 * name the target's columns (422 import-invalid). A refused file is deleted; no operation starts.
 */
export interface SpooledFile {
  path: string;
  bytes: number;
  /** SHA-256 of its bytes (base64url), taken as they arrived: what an Idempotency-Key compares. */
  sha256: string;
}

/**
 * How much of a refused upload is still read, and dropped, after its answer (and for how long),
 * before its connection is closed: a client still sending its file reads the answer only once its
 * sending ends (or the connection is reset, which may lose the answer on its way).
 */
const DISCARD_BYTES = 64 * 1024 * 1024;
const DISCARD_MS = 10_000;

export async function spoolUpload(
  body: Readable,
  options: {
    directory: string;
    maxBytes: number;
    /** The refusal once `reached` bytes passed maxBytes (by default 413 import-too-large naming ROWI_IMPORT_MAX_BYTES). */
    overMax?: (reached: number) => AppError;
    mediaType: ImportMediaType;
    target: ImportTarget;
  },
): Promise<SpooledFile> {
  await mkdir(options.directory, { recursive: true }).catch((error: unknown) => {
    discardRest(body);
    throw spoolFault(error) ?? error;
  });
  const path = join(options.directory, `${randomUUID()}.upload`);
  let bytes = 0;
  let firstLine: Buffer[] = [];
  let firstLineDone = false;
  let blank = true;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const digest = createHash('sha256');
  const check = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (bytes + chunk.length > options.maxBytes)
        return done(options.overMax === undefined ? tooLarge(options.maxBytes) : options.overMax(bytes + chunk.length));
      const nul = chunk.indexOf(0);
      if (nul !== -1) return done(invalid(`byte ${bytes + nul + 1} is NUL (0x00); a text file holds none`, '#'));
      try {
        const text = decoder.decode(chunk, { stream: true });
        if (blank && text.replace(/^\uFEFF/, '').trim() !== '') blank = false;
      } catch {
        return done(
          invalid(
            `the file is not UTF-8 (an invalid byte sequence within bytes ${bytes + 1}–${bytes + chunk.length})`,
            '#',
          ),
        );
      }
      if (!firstLineDone) {
        const end = chunk.indexOf(10);
        firstLine.push(end === -1 ? chunk : chunk.subarray(0, end));
        if (end !== -1 || firstLine.reduce((sum, part) => sum + part.length, 0) > HEADER_BYTES) firstLineDone = true;
      }
      bytes += chunk.length;
      digest.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      try {
        decoder.decode();
      } catch {
        return done(invalid('the file is not UTF-8: it ends inside a character', '#'));
      }
      if (blank) return done(invalid('the file is empty: it holds no row', '#'));
      done();
    },
  });
  // The request is not the pipeline's own source: a pipeline that fails destroys its streams, and a
  // destroyed request resets its connection, often before the client has read the answer.
  // Ended before this handler came to read it (the client gave up; its bytes were not what their
  // coding says): its events are past. Nothing is awaited from here until its listeners are on.
  if (body.destroyed) throw body.errored instanceof AppError ? body.errored : uploadEnded();
  const source = new PassThrough();
  // A refusal of the body itself (bytes that are not what their Content-Encoding says) is passed on.
  const aborted = (error?: Error) => {
    if (!body.readableEnded) source.destroy(error instanceof AppError ? error : uploadEnded());
  };
  body.once('error', aborted).once('close', aborted).pipe(source);
  const writer = createWriteStream(path);
  try {
    await pipeline(source, check, writer);
    if (options.mediaType === 'text/csv') checkHeader(Buffer.concat(firstLine).toString('utf8'), options.target);
  } catch (error) {
    body.unpipe(source);
    discardRest(body);
    // A file refused at its first chunk may not be open yet: removed only once its stream has
    // closed, or the open that comes after would leave an empty file behind.
    if (!writer.closed) await once(writer, 'close').catch(() => undefined);
    await rm(path, { force: true });
    throw spoolFault(error) ?? error;
  } finally {
    body.off('error', aborted).off('close', aborted);
    firstLine = [];
  }
  return { path, bytes, sha256: digest.digest('base64url') };
}

/**
 * The rest of a refused upload, read and dropped so that the client ends its sending and reads the
 * answer on a connection that stays open (as `curl`, browsers and Node's fetch expect); past
 * DISCARD_BYTES or DISCARD_MS the connection is closed instead.
 */
function discardRest(decoded: Readable): void {
  // A decoded body (http/content-encoding.ts): what is left to drop is the bytes as sent.
  const body = (decoded as Partial<DecodedBody>).encoded ?? decoded;
  if (body !== decoded) body.unpipe();
  if (body.readableEnded || body.destroyed) return;
  let dropped = 0;
  const timer = setTimeout(() => body.destroy(), DISCARD_MS).unref();
  body.once('close', () => clearTimeout(timer));
  body.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DISCARD_BYTES) body.destroy();
  });
  body.resume();
}

/**
 * The header row names every required column, no unknown one, none twice (without regard to case
 * and surrounding spaces), separated by commas, semicolons or tabs (engine/imports/csv.ts).
 */
function checkHeader(line: string, target: ImportTarget): void {
  const header = readCsvHeader(line, target);
  if (header === undefined) throw invalid('the first row is not a CSV header row', '#/header');
  if (header.columns.every((column) => column === undefined)) {
    const first = line.replace(/^\uFEFF/, '').replace(/\r$/, '');
    const other = otherSeparator(first, target);
    if (other !== undefined)
      throw invalid(
        `the header row is separated by ${JSON.stringify(other)}, which rowi does not read: separate the columns with commas, semicolons or tabs`,
        '#/header',
      );
    throw invalid(
      `the first row ("${first.slice(0, 100)}${first.length > 100 ? '…' : ''}") names none of the columns (${target.columns.join(', ')}) with a comma, a semicolon or a tab between them; a CSV import starts with a header row naming its columns`,
      '#/header',
    );
  }
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  header.columns.forEach((column, index) => {
    if (column === undefined)
      errors.push({
        in: 'body',
        pointer: `#/header/${index}`,
        detail: `names an unknown column "${header.cells[index]!.slice(0, 100)}"; the columns are ${target.columns.join(', ')}`,
      });
    else if (seen.has(column))
      errors.push({ in: 'body', pointer: `#/header/${index}`, detail: `names the column ${column} a second time` });
    else seen.add(column);
  });
  for (const required of target.required)
    if (!seen.has(required))
      errors.push({
        in: 'body',
        pointer: '#/header',
        detail: `lacks the required column ${required} (the first row must be the header: ${target.columns.join(',')})`,
      });
  if (errors.length > 0)
    throw new AppError('import-invalid', `The CSV header row cannot be used: ${errors[0]!.detail}.`, {
      errors: errors.slice(0, 50),
    });
}

/** The upload's connection ended before its body did (the client gave up, or was cut off): nobody reads the answer. */
function uploadEnded(): AppError {
  return new BadRequestError('The upload ended before its end; nothing of it was kept.', undefined, 'malformed-body');
}

/**
 * The import folder failing under a running rowi (its disk full, the folder made read-only or
 * removed; the start checks that it can be written): a 507 or 503 that says so at once, with
 * Retry-After, rather than an internal error.
 */
function spoolFault(error: unknown): AppError | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const retry = { headers: { 'retry-after': '30' } };
  if (code === 'ENOSPC' || code === 'EDQUOT')
    return new AppError(
      'insufficient-storage',
      'The disk of the import folder is full; nothing of this file was kept. Retry after Retry-After seconds.',
      retry,
    );
  if (code !== undefined && ['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'ENOENT', 'EEXIST', 'EISDIR'].includes(code))
    return new AppError(
      'service-unavailable',
      `rowi cannot write uploaded files now: its import folder (ROWI_IMPORT_DIRECTORY) refuses them (${code}); nothing of this file was kept. Retry after Retry-After seconds.`,
      retry,
    );
  return undefined;
}

/** 413: the file is larger than a limit on its own (no wait would let it through). */
function tooLarge(maxBytes: number, setting = 'ROWI_IMPORT_MAX_BYTES'): AppError {
  return new AppError(
    'import-too-large',
    `The file is larger than ${maxBytes} bytes (${setting}); nothing of it was kept. Split it.`,
    { extensions: { max_bytes: maxBytes } },
  );
}

function invalid(detail: string, pointer: string): AppError {
  return new AppError('import-invalid', `The file cannot be imported: ${detail}. Nothing was stored.`, {
    errors: [{ in: 'body', pointer, detail }],
  });
}

export { tooLarge as importTooLarge };
