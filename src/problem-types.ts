/**
 * The catalogue of problem types the errors of errors.ts belong to. Each problem type has one
 * status, one title and a description, served to callers at GET /problems/{type}.
 */
export const PROBLEM_TYPES = {
  'bad-request': {
    status: 400,
    title: 'Bad request',
    description:
      'The request is malformed in a way no more specific type names: a URL that is not validly percent-encoded, a request line that is not HTTP (connection closed).',
  },
  'malformed-body': {
    status: 400,
    title: 'Malformed body',
    description:
      'The body is not well-formed JSON or XML, is empty, is not UTF-8, or holds text rowi refuses (NUL, a lone surrogate, an XML entity other than the five, an element named `__proto__`, an XML attribute other than `nil="true"` and namespace declarations, an XML declaration of another encoding than UTF-8 or another version than 1.0); `errors` points at it where it can.',
  },
  'body-too-deep': {
    status: 400,
    title: 'Body nested too deeply',
    description: 'The body nests objects, arrays or elements deeper than rowi accepts (32 levels).',
  },
  'body-too-complex': {
    status: 400,
    title: 'Body too complex',
    description:
      "The body holds more than rowi reads: a JSON body more than 10,000 values (members and items); an XML body more than 2,000 elements, 16 attributes an element, 2,000 attributes in all, or 128 KiB of text (element text, attribute values, CDATA and comments). rowi's documents need far less.",
  },
  'xml-doctype-refused': {
    status: 400,
    title: 'XML DOCTYPE refused',
    description: 'XML bodies may not contain a DOCTYPE or entity declarations; rowi never expands or fetches entities.',
  },
  'invalid-query': {
    status: 400,
    title: 'Invalid query parameter',
    description:
      'Unknown query parameter, bad `limit`, `sort`, `cursor` or filter, an integer not written in decimal digits (`0x10`, `1e1`, ` 5`), a NUL (`%00`) in any parameter.',
  },
  'invalid-header': {
    status: 400,
    title: 'Invalid header',
    description: 'A request header rowi reads (Idempotency-Key, If-Match…) is malformed.',
  },
  'malformed-credentials': {
    status: 400,
    title: 'Malformed credentials',
    description:
      'Credentials were sent in a way rowi refuses: in the query string (where they end up in logs), empty, oversized, or two kinds at once. Send one API key in X-API-Key or one bearer token in Authorization.',
  },
  'missing-credentials': {
    status: 401,
    title: 'Authentication required',
    description:
      'The operation needs credentials: an API key in X-API-Key or a bearer token in Authorization (WWW-Authenticate says how).',
  },
  'invalid-credentials': {
    status: 401,
    title: 'Invalid credentials',
    description:
      'Unknown, revoked or expired key; a token expired, not yet valid, badly signed, of another issuer or audience (`error="invalid_token"` and why in `WWW-Authenticate`).',
  },
  'insufficient-scope': {
    status: 403,
    title: 'Insufficient scope',
    description:
      'The caller lacks a scope; `required_scopes` lists them (the same answer whether the record exists or not).',
  },
  'webhook-endpoint-forbidden': {
    status: 403,
    title: 'Not a webhook endpoint this caller may change',
    description:
      "An endpoint acts for its owner, the caller that created it, and may be changed, pinged, rotated, retried or deleted only by a caller that could have created it as it is: one that may read every resource it sends events of (`required_scopes` lists what is missing). Only its owner may change its URL, and the subject of an external issuer's token owns none. `detail` says which; nothing was changed.",
  },
  'acting-forbidden': {
    status: 403,
    title: 'Not while acting for a user',
    description:
      "A request acting for one user (a token issued with `user_id`, or an external token whose user claim names a user) may not create users or items, on any path (a single request, the create entries of a batch, an import of users or items): acting serves one person, whose record and orders it reads and places. Make such records with the caller's own credentials; nothing was changed.",
  },
  'not-found': {
    status: 404,
    title: 'Not found',
    description: 'Unknown path, or an id that names no record (non-numeric, negative or huge ids too).',
  },
  'method-not-allowed': {
    status: 405,
    title: 'Method not allowed',
    description: 'The path exists but does not support this method; Allow lists the methods it does support.',
  },
  'not-acceptable': {
    status: 406,
    title: 'Not acceptable',
    description: 'Accept allows none of the media types the resource is available in (JSON and XML).',
  },
  'email-taken': {
    status: 409,
    title: 'Email already in use',
    description: 'Another user has this email address; emails are compared without regard to case.',
  },
  'sku-taken': {
    status: 409,
    title: 'SKU already in use',
    description: 'Another item has this SKU; SKUs are unique and compared exactly.',
  },
  'item-in-use': {
    status: 409,
    title: 'Item is on orders',
    description:
      'The item appears on orders (open or closed), which would lose their meaning without it; it cannot be deleted.',
  },
  'insufficient-stock': {
    status: 409,
    title: 'Insufficient stock',
    description:
      'Stock cannot cover every line of the order; nothing was reserved. `short_lines` lists each line that is short, with the quantity requested and, to a caller that may read stock (`stock:read`), the quantity available.',
  },
  'invalid-transition': {
    status: 409,
    title: 'Invalid status transition',
    description:
      'An order moves only from placed to fulfilled or cancelled; the status asked for cannot be reached from the current one (or is not a status). `allowed_statuses` lists what can.',
  },
  'order-not-placed': {
    status: 409,
    title: 'Order is closed',
    description: 'Changing the lines or user of a fulfilled or cancelled order (any `PUT` on one).',
  },
  'user-has-open-orders': {
    status: 409,
    title: 'User has placed orders',
    description: 'The user has orders still placed; fulfil, cancel or delete them before deleting the user.',
  },
  'caller-name-taken': {
    status: 409,
    title: 'Caller name already in use',
    description: 'Another caller has this name; names are unique (they are also OAuth client ids).',
  },
  'concurrent-change': {
    status: 409,
    title: 'Concurrent change',
    description:
      'A record the request refers to was deleted by another request at that moment (an order for a user or item being deleted, on PostgreSQL); nothing was changed, and a retry gets the answer that stands.',
  },
  'last-admin': {
    status: 409,
    title: 'Last admin',
    description:
      'The change would leave no caller that can manage callers (the admin role, still holding callers:read and callers:update, with a working API key): demoting, deleting or removing those scopes from the last one, or revoking its last working key. `detail` says which; make another caller an admin with a key first.',
  },
  'rotation-in-progress': {
    status: 409,
    title: 'Secret rotation in progress',
    description:
      "The webhook endpoint's previous secret still signs beside the current one (ROWI_WEBHOOK_SECRET_OVERLAP after the last rotation); rotating again would drop a secret receivers may still verify with. `previous_secret_expires_at` says when it may rotate again.",
  },
  'endpoint-disabled': {
    status: 409,
    title: 'Webhook endpoint disabled',
    description:
      'The webhook endpoint is disabled (by a caller, or by rowi after too many failed attempts): nothing is sent to it. Enable it with PATCH {"enabled": true} first.',
  },
  'delivery-pending': {
    status: 409,
    title: 'Delivery still pending',
    description:
      'The delivery is still pending (waiting for its next attempt or being sent): it will be sent without being asked; retry by hand only a delivery that succeeded or was dead-lettered.',
  },
  'last-event-unknown': {
    status: 410,
    title: 'Last event unknown',
    description:
      'Last-Event-ID names no event rowi still keeps (older than ROWI_EVENTS_RETENTION, or not an event you may see): the stream cannot resume without a gap. Catch up from the collections or GET /v1/events, then open the stream without Last-Event-ID.',
  },
  'too-many-streams': {
    status: 429,
    title: 'Too many event streams',
    description:
      'The caller already holds ROWI_EVENTS_MAX_STREAMS event streams open on this instance; close one first (Retry-After says when to look again).',
  },
  'webhook-url-refused': {
    status: 422,
    title: 'Webhook URL refused',
    description:
      'The webhook URL is not one rowi sends to: not http(s), with credentials, not https without an allow-listed host, or naming (or resolving to) a loopback, private, link-local, multicast or metadata address that ROWI_WEBHOOK_ALLOW_HOSTS does not allow; `errors` says which.',
  },
  'request-timeout': {
    status: 408,
    title: 'Request timeout',
    description:
      'The headers or body did not arrive within `ROWI_HEADERS_TIMEOUT` / `ROWI_REQUEST_TIMEOUT` (no request yet: `instance` is `urn:uuid:` and the id; connection closed).',
  },
  'precondition-failed': {
    status: 412,
    title: 'Precondition failed',
    description:
      'If-Match does not name the current ETag: the record changed since it was read. GET it again and retry.',
  },
  'body-too-large': {
    status: 413,
    title: 'Body too large',
    description:
      'The body is over the limit (refused as soon as `Content-Length` says so, or a chunked body grows past it); the connection then closes, but only once the client has stopped sending or after 2 s, so the answer is not lost to a reset.',
  },
  'unsupported-media-type': {
    status: 415,
    title: 'Unsupported media type',
    description:
      'The body is in a media type or charset this operation does not take (Accept lists those it does), or sent with a Content-Encoding rowi does not decode (Accept-Encoding lists those it does: gzip, deflate, br).',
  },
  'export-too-large': {
    status: 422,
    title: 'Export too large',
    description:
      'The export (a list asked for as `text/csv` or `application/x-ndjson`) would hold more records than `ROWI_EXPORT_MAX_ROWS`; `max_rows` says how many it may. Nothing was sent; narrow it with filters (`created_after`, `created_before`…) and export in parts.',
  },
  'validation-failed': {
    status: 422,
    title: 'Validation failed',
    description:
      'The body is well-formed but breaks the schema; `errors` has a JSON Pointer and a reason for each violation.',
  },
  'read-only-field': {
    status: 422,
    title: 'Read-only field',
    description:
      "A `PUT`/`PATCH` changes a read-only field (`id`, `created_at`, `updated_at`, an order's `total`, a stock's `reserved`…).",
  },
  'unknown-reference': {
    status: 422,
    title: 'Unknown reference',
    description:
      'The body refers to a record that does not exist (a user_id or item_id); `errors` points at each reference.',
  },
  'batch-too-large': {
    status: 413,
    title: 'Batch too large',
    description:
      "The batch holds more entries than `ROWI_BATCH_MAX` (or than the caller's rate limit allows in a minute, since a batch spends one unit per entry); `max_entries` says how many are allowed. Nothing was run; split the batch.",
  },
  'batch-invalid': {
    status: 422,
    title: 'Batch cannot be run',
    description:
      'The batch is well-formed but cannot be run as given: it holds no entry, names one record in two entries, or holds a batch inside an entry (batches do not nest). `errors` points at each entry concerned; nothing was run.',
  },
  'batch-entry-refused': {
    status: 422,
    title: 'A batch entry was refused',
    description:
      'An entry of the batch breaks a rule or names a record that does not exist, so the whole batch was rolled back: nothing is stored. `errors` points at the entry (`#/create/3/sku`); `failed_entry` gives its own problem (type, status, detail) as the single request would have answered it.',
  },
  'batch-entry-conflict': {
    status: 409,
    title: 'A batch entry conflicts with the stored state',
    description:
      "An entry of the batch conflicts with what is stored (a taken email or SKU, stock that cannot cover an order, an entry's `if_match` that is stale, a forbidden transition), so the whole batch was rolled back: nothing is stored. `errors` points at the entry; `failed_entry` gives its own problem as the single request would have answered it.",
  },
  'import-too-large': {
    status: 413,
    title: 'Import file too large',
    description:
      'The uploaded file is larger than `ROWI_IMPORT_MAX_BYTES`, or on its own than what one caller may have waiting (`ROWI_IMPORT_QUEUE_BYTES`); `max_bytes` says how large it may be. Nothing of it was kept and no operation was started.',
  },
  'import-queue-full': {
    status: 429,
    title: 'Import queue full',
    description:
      'The caller already has `ROWI_IMPORT_QUEUE_MAX` imports waiting (queued), or their files and this one would hold more than `ROWI_IMPORT_QUEUE_BYTES`; `queued`, `queued_bytes`, `max_queued` and `max_queued_bytes` say where it stands. Nothing of the file was kept; Retry-After says when to upload it again.',
  },
  'import-spool-full': {
    status: 507,
    title: 'Import space full',
    description:
      "The files of the imports waiting or running, every caller's, and this one would hold more than `ROWI_IMPORT_SPOOL_BYTES`. Nothing of the file was kept; Retry-After says when to upload it again (files go as their imports end).",
  },
  'import-invalid': {
    status: 422,
    title: 'Import file cannot be read',
    description:
      'The uploaded file cannot be imported as a whole: it is empty, is not UTF-8, holds a NUL byte, or (CSV) its header row names none of the columns, names a column twice, names an unknown column or lacks a required one. `errors` says where; no operation was started and nothing was stored.',
  },
  'operation-finished': {
    status: 409,
    title: 'Operation already finished',
    description: 'The operation has already ended (succeeded, failed or cancelled), so it cannot be cancelled.',
  },
  'backup-running': {
    status: 409,
    title: 'A backup is running',
    description:
      'A backup started over HTTP is queued or running (`operation` names it; follow it there): one runs at a time in the whole deployment, so this one was not started; and a running backup cannot be cancelled (it only reads the database, and ends on its own).',
  },
  'backups-not-configured': {
    status: 409,
    title: 'Backups are not configured',
    description:
      'ROWI_BACKUP_DIR is not set on this rowi, so it has no folder to write backups to or list them from. It is a setting of the deployment, not a passing state (hence 409, not 503: retrying does not help): set ROWI_BACKUP_DIR and restart.',
  },
  'backups-on-postgresql': {
    status: 409,
    title: "Backups on PostgreSQL are PostgreSQL's own",
    description:
      "rowi backs up its SQLite file only; on PostgreSQL (ROWI_DATABASE_URL) use PostgreSQL's own tools: pg_dump and pg_restore, or pg_basebackup with WAL archiving for point-in-time recovery (docs/backups.md).",
  },
  'idempotency-key-reused': {
    status: 422,
    title: 'Idempotency key reused',
    description: 'The Idempotency-Key was already used with a different request (method, path or body); use a new key.',
  },
  'headers-too-large': {
    status: 431,
    title: 'Request headers too large',
    description:
      'Request line and headers over 16 KiB (connection closed); a request line that is not HTTP gets `400` `bad-request` the same way.',
  },
  'rate-limited': {
    status: 429,
    title: 'Too many requests',
    description:
      'The caller (or, without credentials, the client address) spent its rate limit; `policy`, `quota` and `window_seconds` name the budget, Retry-After says when to try again, RateLimit-Policy and RateLimit headers say where it stands on every response.',
  },
  'internal-error': {
    status: 500,
    title: 'Internal error',
    description: 'An unexpected fault; it is logged with the request id.',
  },
  'upstream-error': {
    status: 502,
    title: 'Weather provider failed',
    description:
      'The upstream weather provider gave no usable answer (an error status, a body that is not JSON, too large, cut off, or with values out of range; or the connection failed), or rowi stopped calling it for a while after repeated failures (`failure` says which; Retry-After then says when it tries again), and rowi had no earlier value of this place to serve.',
  },
  'upstream-timeout': {
    status: 504,
    title: 'Weather provider timed out',
    description:
      'The upstream weather provider did not answer within ROWI_WEATHER_TIMEOUT, and rowi had no earlier value of this place to serve.',
  },
  'insufficient-storage': {
    status: 507,
    title: 'Insufficient storage',
    description:
      "The database has no space left for the write (a full disk; SQLite's `SQLITE_FULL`, PostgreSQL's `disk_full`): nothing was written, reads go on, `Retry-After: 30`; the same request succeeds once space is freed.",
  },
  'service-unavailable': {
    status: 503,
    title: 'Service unavailable',
    description:
      'A health probe while the instance shuts down (`Retry-After`, `Connection: close`); the database is unreachable, restarting, out of pooled connections or past `ROWI_DATABASE_TIMEOUT`, or PostgreSQL rolled the transaction back for a deadlock (`Retry-After: 2`; retrying is safe); or `/health/ready` finds the database unreachable or not migrated (`Retry-After`, `checks`).',
  },
  'issuer-unavailable': {
    status: 503,
    title: 'Token issuer unavailable',
    description:
      "A bearer token of the external issuer (`ROWI_JWT_ISSUER`) could not be checked: rowi holds no key of its that verifies it, and the issuer's key server (`ROWI_JWT_JWKS_URL`) did not give its keys (down, an error status, no answer within 3 s). Not a refusal of the token, and not counted as a failed authentication; `Retry-After` says when rowi asks the key server again (at most every 30 s).",
  },
  'storage-corrupt': {
    status: 503,
    title: 'Database damaged',
    description:
      'The database is damaged (SQLite: a page of the file is malformed, `SQLITE_CORRUPT` or `SQLITE_NOTADB`; PostgreSQL: `data_corrupted` or `index_corrupted`), found by this request or an earlier one; the operator is told in the log. On SQLite every write is refused from then on (nothing was written) and `/health/ready` fails until rowi is restarted on a sound file; reads that meet no damage go on. `Retry-After: 60`: another instance, or the restored database, may answer.',
  },
} as const satisfies Record<string, { status: number; title: string; description: string }>;

/** What a problem type is: its one status, its title and what it means. */
export interface ProblemTypeRule {
  status: number;
  title: string;
  description: string;
}

/**
 * A problem type a resource declared beside rowi's own adds (engine/resource.ts ResourceModule
 * `problems`): named with declaredProblem, so a typo in one of rowi's own types stays a compile error.
 */
export type DeclaredProblemType = string & { readonly declaredProblem: true };
export const declaredProblem = (name: string): DeclaredProblemType => name as DeclaredProblemType;

export type ProblemType = keyof typeof PROBLEM_TYPES | DeclaredProblemType;

/** The problem types declared resources add, after the built-in ones (declareProblemTypes). */
const DECLARED_PROBLEMS = new Map<string, ProblemTypeRule>();

/**
 * Adds problem types (a declared resource's natural key taken), served at GET /problems/{type} as
 * rowi's own are. A type rowi or an earlier declaration has is refused. Returns what undoes it.
 */
export function declareProblemTypes(types: Record<string, ProblemTypeRule>): () => void {
  const added = Object.keys(types);
  for (const type of added)
    if (problemTypeOf(type) !== undefined) throw new Error(`The problem type ${type} is declared already`);
  for (const type of added) DECLARED_PROBLEMS.set(type, { ...types[type]! });
  return () => {
    for (const type of added) DECLARED_PROBLEMS.delete(type);
  };
}

/** The problem type named so, rowi's own or declared; undefined for a name neither has. */
export function problemTypeOf(name: string): ProblemTypeRule | undefined {
  return Object.hasOwn(PROBLEM_TYPES, name)
    ? PROBLEM_TYPES[name as keyof typeof PROBLEM_TYPES]
    : DECLARED_PROBLEMS.get(name);
}
