/**
 * Imports, exports and backups: files into rowi (POST /v1/{collection}/import, followed as an
 * operation), files out of it (a collection's list with Accept text/csv or application/x-ndjson),
 * and backups of its SQLite file (POST and GET /v1/backups). Everything through the public API.
 */
export { ImportsView } from './imports.js';
export { ExportsView } from './exports.js';
export { BackupsView } from './backups.js';
