// The settings every rowi of the bench runs with. Each sets ROWI_WORKERS explicitly: the default,
// 0, is one process per core, which would make the processes compared differ.

// Every rowi counts requests, with budgets no load can spend: a bench must never measure refusals.
export const HIGH_LIMITS = {
  ROWI_RATE_LIMIT_ANONYMOUS: '1000000000',
  ROWI_RATE_LIMIT_READER: '1000000000',
  ROWI_RATE_LIMIT_EDITOR: '1000000000',
  ROWI_RATE_LIMIT_ADMIN: '1000000000',
  ROWI_RATE_LIMIT_ORDERS_CREATE: '1000000000',
  ROWI_AUTH_FAILURE_LIMIT: '1000000',
  // In memory, whatever the caller's environment says (startProcess leaves '' out); only the Redis target sets it.
  ROWI_REDIS_URL: '',
};

// 0: unlimited, nothing counted (the failed-authentication budget cannot be 0, and counts only 401s).
export const NO_LIMITS = {
  ...HIGH_LIMITS,
  ROWI_RATE_LIMIT_ANONYMOUS: '0',
  ROWI_RATE_LIMIT_READER: '0',
  ROWI_RATE_LIMIT_EDITOR: '0',
  ROWI_RATE_LIMIT_ADMIN: '0',
  ROWI_RATE_LIMIT_ORDERS_CREATE: '0',
};

/**
 * The environment of a rowi on a SQLite file; never PostgreSQL, whatever the caller's environment
 * says. Rate limits: HIGH_LIMITS in memory, unless `limits` says otherwise.
 */
export function sqliteEnv(data, workers, limits = {}) {
  return {
    ROWI_HOST: '127.0.0.1',
    ROWI_PORT: '0',
    ROWI_DATA: data,
    ROWI_DATABASE_URL: '',
    ROWI_WORKERS: String(workers),
    ...HIGH_LIMITS,
    ...limits,
  };
}

/** The environment of a rowi on PostgreSQL (a URL that names its schema), with HIGH_LIMITS in memory. */
export function postgresEnv(databaseUrl, workers) {
  return {
    ROWI_HOST: '127.0.0.1',
    ROWI_PORT: '0',
    ROWI_DATABASE_URL: databaseUrl,
    ROWI_WORKERS: String(workers),
    ...HIGH_LIMITS,
  };
}
