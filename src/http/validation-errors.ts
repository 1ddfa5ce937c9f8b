import type { ErrorObject } from 'ajv';
import { EARLIEST_TIMESTAMP, LATEST_TIMESTAMP } from '../db/clock.js';
import { BadRequestError, NotFoundError, UnprocessableError, type FieldError } from '../errors.js';

/**
 * How a refused value is explained (validation.ts validates): each Ajv error becomes a field
 * error of the problem, with where it was (body, query, path, header), a JSON Pointer, and words a
 * person can act on.
 */

/** Field errors listed in one problem at most; `detail` says how many there were. */
export const MAX_FIELD_ERRORS = 50;

/**
 * Turns Fastify's validation failure into rowi's error: a bad body is 422, a bad query string
 * or header is 400, and a bad path parameter is 404 (a URL that cannot name a record names
 * no record).
 */
export function validationError(errors: ErrorObject[], context: string, url: string): Error {
  if (context === 'params') return new NotFoundError(`Nothing is found at ${url}.`);
  const where: FieldError['in'] = context === 'body' ? 'body' : context === 'querystring' ? 'query' : 'header';
  const allErrors = uniqueErrors(mergeChoices(errors).map((error) => describe(error, where)));
  const fieldErrors = allErrors.slice(0, MAX_FIELD_ERRORS);
  if (where === 'body') {
    const listed = allErrors.length > MAX_FIELD_ERRORS ? `; the first ${MAX_FIELD_ERRORS} are listed` : '';
    return new UnprocessableError(
      fieldErrors.length === 1
        ? `The body is invalid: ${fieldErrors[0]!.pointer} ${fieldErrors[0]!.detail}.`
        : `The body has ${allErrors.length} invalid fields${listed}.`,
      fieldErrors,
    );
  }
  const [first] = fieldErrors;
  return new BadRequestError(
    first
      ? `${where === 'query' ? 'Query parameter' : 'Header'} ${first.pointer.slice(2) || '(all)'} ${first.detail}.`
      : 'The request is invalid.',
    fieldErrors,
    where === 'query' ? 'invalid-query' : 'invalid-header',
  );
}

/**
 * A choice between fixed values (TypeBox's union of literals) fails as one `anyOf` plus one
 * `const` per value, all at the same place; they become one error listing every allowed value.
 */
function mergeChoices(errors: ErrorObject[]): ErrorObject[] {
  const allowed = new Map<string, unknown[]>();
  for (const error of errors) {
    if (error.keyword !== 'const') continue;
    const values = allowed.get(error.instancePath) ?? [];
    values.push((error.params as { allowedValue: unknown }).allowedValue);
    allowed.set(error.instancePath, values);
  }
  return errors.flatMap((error) => {
    if (error.keyword === 'anyOf') return [];
    if (error.keyword !== 'const') return [error];
    const values = allowed.get(error.instancePath);
    if (!values) return [];
    allowed.delete(error.instancePath);
    return [{ ...error, keyword: 'enum', params: { allowedValues: values } }];
  });
}

function describe(error: ErrorObject, where: FieldError['in']): FieldError {
  const params = error.params as Record<string, unknown>;
  const member =
    error.keyword === 'required'
      ? params.missingProperty
      : error.keyword === 'additionalProperties'
        ? params.additionalProperty
        : undefined;
  const path = member === undefined ? error.instancePath : `${error.instancePath}/${escapePointer(String(member))}`;
  return { in: where, pointer: `#${path}`, detail: explain(error, where) };
}

function explain(error: ErrorObject, where: FieldError['in']): string {
  const params = error.params as Record<string, unknown>;
  const custom = (error.parentSchema as { 'x-error'?: string } | undefined)?.['x-error'];
  switch (error.keyword) {
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return where === 'query' ? 'is not a known query parameter' : 'is not a known field';
    case 'type':
      return `must be ${article(String(params.type))}`;
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : `must be at least ${params.limit} characters long`;
    case 'maxLength':
      return `must be at most ${params.limit} characters long`;
    case 'minimum':
      return `must be at least ${params.limit}`;
    case 'maximum':
      return `must be at most ${params.limit}`;
    case 'minItems':
      return `must have at least ${params.limit} items`;
    case 'maxItems':
      return `must have at most ${params.limit} items`;
    case 'format':
      return custom ?? `must be a valid ${FORMAT_NAMES[String(params.format)] ?? String(params.format)}`;
    case 'pattern':
      return custom ?? `must match the pattern ${String(params.pattern)}`;
    case 'const':
    case 'enum':
      return `must be one of ${JSON.stringify(params.allowedValues ?? params.allowedValue)}`;
    default:
      return custom ?? error.message ?? 'is invalid';
  }
}

const FORMAT_NAMES: Record<string, string> = {
  email: 'email address',
  'date-time': `RFC 3339 date-time with a time zone, from ${EARLIEST_TIMESTAMP} to ${LATEST_TIMESTAMP} (no leap second)`,
  'uri-reference': 'URI reference',
};

function article(type: string): string {
  const name =
    type === 'object' ? 'an object' : type === 'array' ? 'an array' : type === 'integer' ? 'an integer' : `a ${type}`;
  return type === 'null' ? 'null' : name;
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** One reason per location: the first rule a value breaks is the one worth fixing first. */
function uniqueErrors(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((error) => {
    if (seen.has(error.pointer)) return false;
    seen.add(error.pointer);
    return true;
  });
}

/** The field errors of a refused record (an imported row), explained as a body's would be. */
export function recordFieldErrors(errors: ErrorObject[]): FieldError[] {
  return uniqueErrors(mergeChoices(errors).map((error) => describe(error, 'body'))).slice(0, MAX_FIELD_ERRORS);
}
