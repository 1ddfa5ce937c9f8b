import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import type { RequestContext } from '../../auth/context.js';
import { sightOnOperations } from '../../auth/visibility.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { sendHeadOfStream } from '../../http/export.js';
import { compileXmlElementWriter, type XmlSchema } from '../../http/xml.js';
import { fieldsParameter, selectFields, sendFields } from '../../http/fields.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { RESPONSE_HEADERS, operation, representation } from '../../http/schemas.js';
import { findOperationById, findOperationErrors } from '../../engine/operations/operations.repository.js';
import {
  OperationIdParams,
  RowErrorListSchema,
  RowErrorSchema,
  operationSchemas,
  type ImportTargetName,
  type RowError,
} from '../../engine/operations/operations.schema.js';
import {
  cancelOperation,
  getOperation,
  listOperations,
  operationNotFound,
  presentRowError,
} from '../../engine/operations/operations.service.js';

/**
 * Long-running operations (docs/bulk.md "Imports"): listed, read (with Retry-After while they
 * run), cancelled, and their refused rows downloaded (NDJSON, or one JSON or XML document). A caller sees the operations it
 * started; an admin sees all (auth/visibility.ts sightOnOperations).
 */
const RETRY_AFTER = {
  'Retry-After': { type: 'string', description: 'while queued or running: seconds before asking again' },
};
const ERRORS_PAGE = 1000;
const ERRORS_MEDIA_TYPES = {
  ndjson: 'application/x-ndjson',
  json: 'application/json; charset=utf-8',
  xml: 'application/xml; charset=utf-8',
} as const;
const errorElement = compileXmlElementWriter(RowErrorSchema as XmlSchema);
/** How the refused rows are written in each format, a row at a time: what opens and closes the document, and a row. */
const ERRORS_WRITERS: Record<
  keyof typeof ERRORS_MEDIA_TYPES,
  { open: string; close: string; item: (error: RowError, first: boolean) => string }
> = {
  ndjson: { open: '', close: '', item: (error) => `${JSON.stringify(error)}\n` },
  json: { open: '{"data":[', close: ']}', item: (error, first) => `${first ? '' : ','}${JSON.stringify(error)}` },
  xml: {
    open: '<?xml version="1.0" encoding="UTF-8"?>\n<errors><data>',
    close: '</data></errors>',
    item: (error) => errorElement(error),
  },
};
/** `importTargets` are the import targets the app registers: an operation names one, a list may ask for one. */
const operationsRoutes: FastifyPluginAsyncTypebox<{ importTargets: readonly ImportTargetName[] }> = async (
  app,
  { importTargets },
) => {
  const { db } = app;
  const { OPERATION_COLLECTION, OperationPageSchema, OperationSchema } = operationSchemas(importTargets);
  const OPERATION_FIELDS = { record: OperationSchema };
  const unfinished = (status: string) => status === 'queued' || status === 'running';

  app.get(
    '/v1/operations',
    {
      schema: operation({
        operationId: 'listOperations',
        permission: 'operations:read',
        summary: 'List operations (imports)',
        description:
          'A page of the operations the caller started (an admin: every operation), oldest first unless `sort` says otherwise, paged by keyset like every collection (Link rel="next", `next_cursor`).',
        tags: ['operations'],
        querystring: listQuerySchema(OPERATION_COLLECTION, OPERATION_FIELDS),
        response: { 200: representation(OperationPageSchema, 'A page of operations', RESPONSE_HEADERS.link) },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(OPERATION_COLLECTION, request.query as Record<string, unknown>);
      const fields = selectFields(OPERATION_FIELDS, (request.query as { fields?: string }).fields);
      const page = await listOperations(db, query, sightOnOperations(request.context!.access));
      return sendPage(request, reply, page, query, fields);
    },
  );

  app.get(
    '/v1/operations/:id',
    {
      schema: operation({
        operationId: 'getOperation',
        permission: 'operations:read',
        summary: 'Read an operation',
        description:
          'Its status (queued, running, succeeded, failed, cancelled), progress (bytes and rows), times, caller, the first errors of its rows, and once ended its summary: which rows were committed. While queued or running, Retry-After says when to ask again.',
        tags: ['operations'],
        params: OperationIdParams,
        querystring: Type.Object({ fields: fieldsParameter(OPERATION_FIELDS) }),
        response: { 200: representation(OperationSchema, 'The operation', RETRY_AFTER) },
      }),
    },
    async (request, reply) => {
      const fields = selectFields(OPERATION_FIELDS, request.query.fields);
      const view = await getOperation(db, request.params.id, sightOnOperations(request.context!.access));
      if (unfinished(view.status)) reply.header('retry-after', '1');
      return sendFields(request, reply.header('cache-control', 'no-store'), view, fields);
    },
  );

  const cancel = async (id: number, { access }: RequestContext) =>
    unitOfWork(db, (trx) => cancelOperation(trx, id, sightOnOperations(access)));
  const cancelSchema = (operationId: string, summary: string) =>
    operation({
      operationId,
      permission: 'operations:update',
      summary,
      description:
        'A queued operation ends at once, cancelled; a running one stops at its next commit (a chunk of rows): in partial mode the rows committed so far stay, and the operation says which (summary, progress.committed_through); in atomic mode on PostgreSQL none does. 202 with the operation as it is now (poll it to see it end); 409 operation-finished once it has ended.',
      tags: ['operations'],
      params: OperationIdParams,
      problems: [409],
      response: {
        202: representation(OperationSchema, 'Cancellation asked for (or done, when it was queued)', RETRY_AFTER),
      },
    });
  for (const [method, url, operationId, summary] of [
    ['POST', '/v1/operations/:id/cancel', 'cancelOperation', 'Cancel an operation'],
    ['DELETE', '/v1/operations/:id', 'deleteOperation', 'Cancel an operation (as POST …/cancel)'],
  ] as const)
    app.route({
      method,
      url,
      schema: cancelSchema(operationId, summary),
      handler: async (request, reply) => {
        const view = await cancel((request.params as { id: number }).id, request.context!);
        if (unfinished(view.status)) reply.header('retry-after', '1');
        return reply.code(202).send(view);
      },
    });

  app.get(
    '/v1/operations/:id/errors',
    {
      schema: operation({
        operationId: 'getOperationErrors',
        permission: 'operations:read',
        summary: 'Download every refused row of an operation',
        description:
          'Every error of its rows (row, field, problem, detail), in row order, streamed from the database a page at a time, however many there are: NDJSON (application/x-ndjson or application/jsonl, one JSON object a line) when Accept is absent or allows anything, or a JSON or XML document `{"data": [...]}` when Accept asks for it.',
        tags: ['operations'],
        params: OperationIdParams,
        defaultFormat: 'ndjson',
        response: {
          200: {
            description: 'The errors: one a line (NDJSON), or in one document (JSON, XML)',
            headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit },
            content: {
              'application/x-ndjson': {
                schema: Type.String({
                  description: 'one OperationRowError a line',
                  maxLength: 1_000_000_000,
                  examples: [
                    '{"row":17,"field":"price","problem":"validation-failed","detail":"price must be a decimal string"}\n',
                  ],
                }),
              },
              'application/json': { schema: RowErrorListSchema },
              'application/xml': { schema: RowErrorListSchema },
            },
          },
        },
      }),
    },
    async (request, reply) => {
      const id = request.params.id;
      if ((await findOperationById(db, id, sightOnOperations(request.context!.access))) === undefined)
        throw operationNotFound(id);
      const format = request.format as 'ndjson' | 'json' | 'xml';
      reply.type(ERRORS_MEDIA_TYPES[format]).header('cache-control', 'no-store');
      if (request.method === 'HEAD') return sendHeadOfStream(reply);
      const write = ERRORS_WRITERS[format];
      async function* chunks() {
        yield write.open;
        let after = 0;
        for (;;) {
          const page = await findOperationErrors(db, id, after, ERRORS_PAGE);
          const firstPage = after === 0;
          if (page.length > 0)
            yield page.map((error, index) => write.item(presentRowError(error), firstPage && index === 0)).join('');
          if (page.length < ERRORS_PAGE) break;
          after = page.at(-1)!.seq;
        }
        yield write.close;
      }
      return reply.send(Readable.from(chunks()) as never);
    },
  );
};

export default operationsRoutes;
