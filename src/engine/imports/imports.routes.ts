import type { FastifyPluginAsync } from 'fastify';
import type { RetainedTable } from '../../db/retention.js';
import { importOperation, registerImportBodies } from './upload-route.js';
import type { ImportRunner } from './runner.js';
import type { ImportTarget } from './target.js';
import { deleteOperationsBefore } from '../operations/operations.repository.js';

/** `POST /v1/<collection>/import` of every collection an import can write (docs/bulk.md "Imports"). */
const importsRoutes: FastifyPluginAsync<{ runner: ImportRunner; targets: readonly ImportTarget[] }> = async (
  app,
  { runner, targets },
) => {
  registerImportBodies(app);
  for (const target of targets) importOperation(app, target, runner, targets);
};

export default importsRoutes;

/** Ended operations (with their row errors, by foreign key) kept for ROWI_IMPORT_RETENTION. */
export function operationsRetention(retentionSeconds: number): RetainedTable {
  return {
    table: 'operations',
    key: 'id',
    time: 'created_at',
    retentionSeconds,
    prune: deleteOperationsBefore,
  };
}
