/**
 * Tests make far more requests per minute, many without or with bad credentials, than the
 * default limits allow: limits are off unless a test sets them (test/rate-limits/ does).
 */
export const NO_RATE_LIMITS: Record<string, string> = {
  ROWI_RATE_LIMIT_ANONYMOUS: '0',
  ROWI_RATE_LIMIT_READER: '0',
  ROWI_RATE_LIMIT_EDITOR: '0',
  ROWI_RATE_LIMIT_ADMIN: '0',
  ROWI_RATE_LIMIT_ORDERS_CREATE: '0',
  ROWI_AUTH_FAILURE_LIMIT: '1000000',
};
