import { rename, rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { assertMayCreate } from '../../auth/visibility.js';
import { UnsupportedMediaTypeError } from '../../errors.js';
import { IdempotencyHeaders, isKeyAnswered, runIdempotent, streamedFingerprint } from '../../http/idempotency.js';
import { RESPONSE_HEADERS, operation, representation } from '../../http/schemas.js';
import { validatorCompiler } from '../../http/validation.js';
import { MEDIA_TYPES, type ImportMediaType } from './rows.js';
import { spoolPath, type ImportRunner } from './runner.js';
import type { ImportTarget } from './target.js';
import { admitUpload, checkQueueRoom, importCallerOf } from './queue.js';
import { importTooLarge, spoolUpload } from './upload.js';
import { lockClaims, setHolder, type StoredOperation } from '../operations/operations.repository.js';
import { operationSchemas } from '../operations/operations.schema.js';
import { operationPath, presentOperation, queueOperation } from '../operations/operations.service.js';

/**
 * `POST /v1/<collection>/import` (docs/bulk.md "Imports"): the file is streamed to disk (never
 * whole in memory) and checked for what makes it unreadable as a whole; then an operation is
 * queued and the answer is 202 with its Location. The import runs in the background
 * (engine/imports/runner.ts) when a turn is free.
 */
const Mode = Type.Union([Type.Literal('atomic'), Type.Literal('partial')], {
  default: 'atomic',
  description: 'atomic (default): every row or none; partial: good rows committed, bad ones reported',
});
const OnConflict = Type.Union([Type.Literal('error'), Type.Literal('skip'), Type.Literal('update')], {
  default: 'error',
  description:
    'a row whose natural key (item sku, user email) is taken, in the store or by an earlier row of the file: refused (error, default), skipped, or it updates that record',
});
const DryRun = Type.Union([Type.Literal('true'), Type.Literal('false')], {
  default: 'false',
  description: 'true: check every row as the import would, store nothing',
});

/** The options of an import; on_conflict only where the collection has a natural key (orders have none). */
const importQuery = (target: ImportTarget) =>
  Type.Object(
    target.keyOf === undefined
      ? { mode: Type.Optional(Mode), dry_run: Type.Optional(DryRun) }
      : { mode: Type.Optional(Mode), on_conflict: Type.Optional(OnConflict), dry_run: Type.Optional(DryRun) },
    { additionalProperties: false },
  );

const fileBody = (target: ImportTarget) =>
  Type.String({
    format: 'binary',
    maxLength: 1_099_511_627_776,
    description:
      'text/csv: a header row naming the columns (without regard to case), then one record a row, the columns separated by commas, semicolons or tabs as the header row is (UTF-8; a BOM, CRLF or LF accepted). application/x-ndjson: one JSON object a line.',
    examples: [`${JSON.stringify(target.example)}\n`],
  });

/** `POST ${target.path}/import`; `targets` are every target the app registers, which an operation names. */
export function importOperation(
  app: FastifyInstance,
  target: ImportTarget,
  runner: ImportRunner,
  targets: readonly ImportTarget[],
): void {
  const { db, config } = app;
  const { OperationSchema } = operationSchemas(targets.map((each) => each.name));
  app.post(
    `${target.path}/import`,
    {
      // The body is a stream read by the handler; the query string is validated as everywhere.
      validatorCompiler: (route) => (route.httpPart === 'body' ? () => true : validatorCompiler(route)),
      schema: operation({
        operationId: `import${target.name[0]!.toUpperCase()}${target.name.slice(1)}`,
        permission: target.scopes[0]!,
        alsoPermissions: target.scopes.slice(1),
        summary: `Import a file of ${target.name} (a long-running operation)`,
        description: `Streams a CSV (header row: ${target.columns.join(', ')}; required: ${target.required.join(', ')}) or NDJSON file of ${target.name} into an operation; 202 with Location /v1/operations/{id} to follow it. Needs ${target.scopes.join(' and ')}. A file may be sent compressed, with Content-Encoding gzip, deflate or br (another coding is 415, with Accept-Encoding; bytes that are not what their coding says are 400 malformed-body). At most ROWI_IMPORT_MAX_BYTES, counted as decoded (413 import-too-large); a file that is empty, not UTF-8, holds a NUL byte or whose CSV header is wrong is 422 import-invalid, and no operation starts. Rows are checked as the single request's body and written in chunks; see docs/bulk.md "Imports".${target.note === undefined ? '' : ` ${target.note}`}`,
        tags: [target.resource],
        querystring: importQuery(target),
        headers: IdempotencyHeaders,
        body: fileBody(target),
        consumes: MEDIA_TYPES,
        response: {
          202: representation(
            OperationSchema,
            'The operation, queued (or, for a repeated Idempotency-Key, the one the first upload queued)',
            {
              ...RESPONSE_HEADERS.location,
              ...RESPONSE_HEADERS.replayed,
              'Retry-After': { type: 'string', description: 'seconds before asking' },
            },
          ),
        },
      }),
    },
    async (request, reply) => {
      // Run with the access of this request, wherever it runs; acting for a user creates no users or items.
      const { access, requestId, idempotency } = request.context!;
      assertMayCreate(access, target.resource);
      const mediaType = mediaTypeOf(request);
      const declared = Number(request.headers['content-length']);
      if (Number.isFinite(declared) && declared > config.importMaxBytes) throw importTooLarge(config.importMaxBytes);
      const query = request.query as {
        mode?: 'atomic' | 'partial';
        on_conflict?: 'error' | 'skip' | 'update';
        dry_run?: string;
      };
      const options = {
        media_type: mediaType,
        mode: query.mode ?? 'atomic',
        on_conflict: query.on_conflict ?? 'error',
        dry_run: query.dry_run === 'true' ? 1 : 0,
      } as const;
      const caller = importCallerOf(access);
      // A full queue is refused before the file is read; not a retry whose key holds an answer, which replays it.
      const room = (await isKeyAnswered(db, idempotency))
        ? { maxBytes: config.importMaxBytes }
        : await admitUpload(db, caller, config, Number.isFinite(declared) ? declared : undefined);
      const file = await spoolUpload(request.body as Readable, {
        directory: runner.directory,
        ...room,
        mediaType,
        target,
      });
      let created: StoredOperation | undefined;
      let answer;
      try {
        // The same key with the same file and options answers the operation the first upload
        // queued; the key is claimed in the transaction that queues it (http/idempotency.ts).
        answer = await runIdempotent(
          db,
          request,
          idempotency,
          async (trx) => {
            // Measured again under the claims' lock: exact across processes (engine/imports/queue.ts).
            await lockClaims(trx);
            await checkQueueRoom(trx, caller, config, file.bytes);
            created = await queueOperation(trx, {
              kind: 'import',
              target: target.name,
              status: 'queued',
              ...options,
              access,
              request_id: requestId,
              holder: null,
              lease_until: runner.leaseUntil(),
              bytes_total: file.bytes,
            });
            return {
              status: 202,
              location: operationPath(created.id),
              body: presentOperation({ ...created, holder: runner.holder }, []),
            };
          },
          streamedFingerprint(request, options, file.sha256),
        );
        if (answer.replayed) await rm(file.path, { force: true });
        else {
          await rename(file.path, spoolPath(runner.directory, created!.id));
        }
      } catch (error) {
        await rm(file.path, { force: true });
        throw error;
      }
      if (!answer.replayed) {
        await setHolder(db, created!.id, runner.holder, runner.leaseUntil());
        runner.wake();
      } else reply.header('idempotent-replayed', 'true');
      return reply.code(202).header('location', answer.location!).header('retry-after', '1').send(answer.body);
    },
  );
}

/** The media type of the body, one the import takes (415 otherwise, also for a charset other than UTF-8). */
function mediaTypeOf(request: FastifyRequest): ImportMediaType {
  const contentType = request.headers['content-type'] ?? '';
  const [type = '', ...parameters] = contentType.split(';').map((part) => part.trim().toLowerCase());
  const charset = parameters
    .find((parameter) => parameter.startsWith('charset='))
    ?.slice(8)
    .replace(/"/g, '');
  if (
    !(MEDIA_TYPES as readonly string[]).includes(type) ||
    (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
  )
    throw new UnsupportedMediaTypeError(contentType, [...MEDIA_TYPES]);
  return type as ImportMediaType;
}

/** Takes the import media types as streams: the handler reads them (registered in the import routes' scope). */
export function registerImportBodies(app: FastifyInstance): void {
  app.addContentTypeParser([...MEDIA_TYPES], (_request, payload, done) => done(null, payload));
}
