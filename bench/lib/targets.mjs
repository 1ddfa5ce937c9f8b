// A target is one request shape against one server. What a target is compared with is named on
// it: `baseline` (bare Fastify, same operation), `noAuth` (rowi without authentication),
// `limitsOff` (rowi with every rate limit off); report.mjs turns those names into ratios.

// What serves a target, and how it is called: the first column of the table.
export const LABELS = {
  bare: 'bare Fastify',
  noAuth: 'rowi (SQLite) no auth (bench only)',
  apiKey: 'rowi (SQLite) API key + audit',
  // rowi-auth: the same settings as rowi, on a copy of its database taken with the no-auth one.
  authApiKey: 'rowi-auth (SQLite) API key + audit',
  authJwt: 'rowi-auth (SQLite) JWT + audit',
  // rowi-own: another copy, where the admin sees only its own users (the probe is one of them).
  ownRecords: 'rowi-own (SQLite) API key + audit, own records',
  limitsOff: 'rowi (SQLite) API key + audit, rate limits off',
  limitsMemory: 'rowi (SQLite) API key + audit, rate limits in memory',
  limitsRedis: 'rowi (SQLite) API key + audit, rate limits in Redis',
};

// The operation whose rate-limit overhead is measured.
export const RATE_LIMIT_OPERATION = 'GET /v1/users/{id}';

// "Storage and processes": these operations, on these columns (the first is rowi's API key target).
export const STORAGE_OPERATIONS = ['GET /v1/users/{id}', 'POST /v1/orders'];
export const STORAGE_COLUMNS = [
  { storage: 'SQLite', workers: 1 },
  { storage: 'SQLite', workers: 2 },
  { storage: 'PostgreSQL', workers: 1 },
  { storage: 'PostgreSQL', workers: 2 },
];

/** One request shape against one server; its name is its label and operation. */
export function targetOf(label, operation, server, request) {
  return { name: `${label} ${operation}`, label, operation, server, ...request };
}

/** The baseline and rowi (with an API key) answering one operation; the rowi target names its baseline. */
export function pair(bare, rowi, operation, request, credentials) {
  // The baseline gets the same request, credentials included, and ignores them.
  const baseline = targetOf(LABELS.bare, operation, bare, { ...request, credentials });
  return [
    baseline,
    targetOf(LABELS.apiKey, operation, rowi, {
      ...request,
      credential: 'API key',
      credentials,
      baseline: baseline.name,
      storage: 'SQLite',
      workers: 1,
    }),
  ];
}

/** "SQLite, 2 workers": a column of "Storage and processes". */
export function columnOf({ storage, workers }) {
  return `${storage}, ${workers} worker${workers === 1 ? '' : 's'}`;
}

/** rowi on one storage with some worker processes, with an API key, paired with the baseline of the operation. */
export function storageTarget(server, storage, workers, operation, request, baseline) {
  return targetOf(`rowi (${columnOf({ storage, workers })}) API key + audit`, operation, server, {
    ...request,
    credential: 'API key',
    credentials: server.credentials,
    baseline: baseline.name,
    storage,
    workers,
  });
}

/**
 * rowi's API key target of docs/performance.md over the baseline and of earlier records: SQLite,
 * one process, rate limits in memory, the main rowi (the auth comparison's targets carry a variant).
 */
export function isReference(target) {
  return (
    target.variant === undefined &&
    (target.storage === undefined || (target.storage === 'SQLite' && target.workers === 1))
  );
}
