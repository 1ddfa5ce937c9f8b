import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { RESPONSE_HEADERS, operation, representation } from '../../http/schemas.js';
import { operationSchemas, type ImportTargetName } from '../../engine/operations/operations.schema.js';
import { operationPath } from '../../engine/operations/operations.service.js';
import {
  BackupListQuery,
  BackupNameParams,
  BackupPageSchema,
  BackupSchema,
} from '../../engine/operations/backups.schema.js';
import { backupsUnavailable, getBackup, listBackupPage, type BackupRunner } from './backups.service.js';

/**
 * Backups of the SQLite file over HTTP (docs/backups.md): start one (an
 * operation to follow), list those in ROWI_BACKUP_DIR, read one. `runner` is undefined where there
 * is nothing to back up into (no ROWI_BACKUP_DIR, or PostgreSQL): every route then answers 409
 * with the reason. `importTargets` are the import targets the app registers, which an operation may name.
 */
const backupsRoutes: FastifyPluginAsyncTypebox<{
  runner: BackupRunner | undefined;
  importTargets: readonly ImportTargetName[];
}> = async (app, { runner, importTargets }) => {
  const { config } = app;
  const { OperationSchema } = operationSchemas(importTargets);
  const available = () => {
    const reason = backupsUnavailable(config);
    if (reason !== undefined || runner === undefined) throw reason;
    return { runner, folder: config.backupDir };
  };
  const WHY_409 =
    '409 backups-not-configured without ROWI_BACKUP_DIR, 409 backups-on-postgresql on PostgreSQL (use its own tools).';

  app.post(
    '/v1/backups',
    {
      schema: operation({
        operationId: 'startBackup',
        permission: 'backups:create',
        summary: 'Take a backup of the database (a long-running operation)',
        description: `Starts a backup of the SQLite file into ROWI_BACKUP_DIR: 202 with Location /v1/operations/{id}, queued, then running, then succeeded (its summary names the backup: file, size, SHA-256, schema version, row counts) or failed (why; no backup was written, the database is unchanged). Requests go on meanwhile: the copy is one consistent snapshot, taken by a process of its own at the lowest priority. One backup at a time in the whole deployment: 409 backup-running names the one queued or running. ${WHY_409}`,
        tags: ['backups'],
        problems: [409],
        response: {
          202: representation(OperationSchema, 'The backup operation, queued', {
            ...RESPONSE_HEADERS.location,
            'Retry-After': { type: 'string', description: 'seconds before asking' },
          }),
        },
      }),
    },
    async (request, reply) => {
      const { runner: backups } = available();
      const view = await backups.start(request.context!);
      return reply.code(202).header('location', operationPath(view.id)).header('retry-after', '1').send(view);
    },
  );

  app.get(
    '/v1/backups',
    {
      schema: operation({
        operationId: 'listBackups',
        permission: 'backups:read',
        summary: 'List the backups in ROWI_BACKUP_DIR',
        description: `A page of the backups in ROWI_BACKUP_DIR, newest first: those of the schedule and of POST /v1/backups, each as its manifest records it (file, size, time, SHA-256, schema version, row counts). Paged like every collection (Link rel="next", next_cursor). ${WHY_409}`,
        tags: ['backups'],
        querystring: BackupListQuery,
        problems: [409],
        response: { 200: representation(BackupPageSchema, 'A page of backups', RESPONSE_HEADERS.link) },
      }),
    },
    async (request, reply) => {
      const { folder } = available();
      const page = await listBackupPage(folder, request.query, (error) =>
        request.log.warn(`a backup in ROWI_BACKUP_DIR is left out of the list: ${error.message}`),
      );
      if (page.nextCursor !== null) {
        const target = new URL(request.url, 'http://rowi.invalid');
        target.searchParams.set('cursor', page.nextCursor);
        reply.header('link', `<${target.pathname}${target.search}>; rel="next"`);
      }
      return reply.header('cache-control', 'no-store').send({ data: page.rows, next_cursor: page.nextCursor });
    },
  );

  app.get(
    '/v1/backups/:name',
    {
      schema: operation({
        operationId: 'getBackup',
        permission: 'backups:read',
        summary: 'Read a backup',
        description: `One backup in ROWI_BACKUP_DIR by its file name, as its manifest records it; 404 when there is none. ${WHY_409}`,
        tags: ['backups'],
        params: BackupNameParams,
        problems: [409],
        response: { 200: representation(BackupSchema, 'The backup') },
      }),
    },
    async (request, reply) => {
      const { folder } = available();
      return reply.header('cache-control', 'no-store').send(await getBackup(folder, request.params.name));
    },
  );
};

export default backupsRoutes;
