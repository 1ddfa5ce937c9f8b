/**
 * Typed errors that services and HTTP plumbing throw, each of a problem type of the catalogue
 * (problem-types.ts); only http/problem.ts turns an error into a response.
 */
import { problemTypeOf, type ProblemType } from './problem-types.js';

/** One offending location in a request: a JSON Pointer (RFC 6901, fragment form) and why. */
export interface FieldError {
  /** Where the pointer points: the request body, the query string, a header or the path. */
  in: 'body' | 'query' | 'header' | 'path';
  pointer: string;
  detail: string;
}

export interface AppErrorOptions {
  errors?: FieldError[];
  /** Extra members of the problem object (RFC 9457 §3.2 extensions). */
  extensions?: Record<string, unknown>;
  /** Response headers that belong to this error (Allow on 405, Retry-After on 503…). */
  headers?: Record<string, string>;
  /** Only for relaying a client error whose status the catalogue does not fix. */
  status?: number;
}

export class AppError extends Error {
  readonly type: ProblemType;
  readonly status: number;
  readonly title: string;
  readonly errors: FieldError[] | undefined;
  readonly extensions: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(type: ProblemType, detail: string, options: AppErrorOptions = {}) {
    super(detail);
    this.name = new.target.name;
    this.type = type;
    const known = problemTypeOf(type);
    if (known === undefined) throw new Error(`${type} is no problem type: declare it with the resource`);
    this.status = options.status ?? known.status;
    this.title = known.title;
    this.errors = options.errors;
    this.extensions = options.extensions;
    this.headers = options.headers;
  }
}

export class BadRequestError extends AppError {
  constructor(detail: string, errors?: FieldError[], type: ProblemType = 'bad-request') {
    super(type, detail, errors ? { errors } : {});
  }
}

export class NotFoundError extends AppError {
  constructor(detail: string) {
    super('not-found', detail);
  }
}

export class MethodNotAllowedError extends AppError {
  constructor(method: string, path: string, allowed: string[]) {
    super('method-not-allowed', `${method} is not supported on ${path}; use ${allowed.join(', ')}.`, {
      headers: { allow: allowed.join(', ') },
      extensions: { allowed_methods: allowed },
    });
  }
}

export class NotAcceptableError extends AppError {
  constructor(accept: string, available: string[]) {
    super(
      'not-acceptable',
      `None of the media types in Accept (${accept}) can be produced; this resource is available as ${available.join(', ')}.`,
      {
        extensions: { available_media_types: available },
      },
    );
  }
}

export class ConflictError extends AppError {
  constructor(type: ProblemType, detail: string, extensions?: Record<string, unknown>) {
    super(type, detail, extensions ? { extensions } : {});
  }
}

export class PreconditionFailedError extends AppError {
  constructor(detail: string) {
    super('precondition-failed', detail);
  }
}

export class UnsupportedMediaTypeError extends AppError {
  constructor(contentType: string, accepted: string[]) {
    super(
      'unsupported-media-type',
      `A body of type ${contentType || '(none)'} is not accepted here; send one of ${accepted.join(', ')} (UTF-8).`,
      {
        // RFC 9110 §12.5.1: Accept in a 415 response lists the media types that would be taken.
        headers: accepted.length > 0 ? { accept: accepted.join(', ') } : {},
        extensions: { accepted_media_types: accepted },
      },
    );
  }
}

export class UnprocessableError extends AppError {
  constructor(detail: string, errors: FieldError[], type: ProblemType = 'validation-failed') {
    super(type, detail, { errors });
  }
}

/** 401/400 with the WWW-Authenticate challenge of RFC 6750 §3. */
export class AuthenticationError extends AppError {
  constructor(
    type: 'missing-credentials' | 'invalid-credentials' | 'malformed-credentials',
    detail: string,
    challenge: string,
  ) {
    super(type, detail, { headers: { 'www-authenticate': challenge } });
  }
}

/** 403: known caller, missing scope (RFC 6750 §3.1 insufficient_scope). */
export class ForbiddenError extends AppError {
  constructor(detail: string, missing: string[], challenge: string) {
    super('insufficient-scope', detail, {
      headers: { 'www-authenticate': challenge },
      extensions: { required_scopes: missing },
    });
  }
}
