import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, toTimestamp } from '../db/clock.js';
import { BadRequestError, NotFoundError, UnprocessableError, type FieldError } from '../errors.js';

/**
 * Request validation. One Ajv per kind of input, because they must differ:
 * - bodies are never coerced ("5" is not a number, 5 is not a name) and every violation is
 *   reported, each with a JSON Pointer;
 * - query strings and path parameters arrive as text and are coerced to the declared types;
 *   a path id must also be written canonically ("007", "1e3" and "0x10" name no record).
 */
function createAjv(options: { coerce: boolean; allErrors: boolean }) {
  const ajv = new Ajv({
    allErrors: options.allErrors,
    coerceTypes: options.coerce,
    useDefaults: options.coerce,
    removeAdditional: false,
    strict: false,
    verbose: true,
  });
  addFormats.default(ajv);
  // Every timestamp a caller sends (bodies and query strings alike) is one rowi can store, read
  // back and serialise: RFC 3339 with an offset, years 0001–9999 in UTC, no leap second. Checked
  // here, before any handler runs, so a refused instant never reaches storage.
  ajv.addFormat('date-time', { type: 'string', validate: (text: string) => toTimestamp(text) !== undefined });
  ajv.addKeyword({ keyword: 'xml' });
  return ajv;
}

const bodyAjv = createAjv({ coerce: false, allErrors: true });
const firstErrorAjv = createAjv({ coerce: false, allErrors: false });
const textAjv = createAjv({ coerce: true, allErrors: false });

/**
 * Bodies of up to this many values (members, items) get every violation reported; larger ones
 * (a million bad order lines in a megabyte) get the first, since reporting each would cost
 * seconds of CPU and megabytes of answer. rowi's largest valid body has a few hundred values.
 */
const EVERY_ERROR_UP_TO_VALUES = 2000;

/** Field errors listed in one problem at most; `detail` says how many there were. */
export const MAX_FIELD_ERRORS = 50;

const CANONICAL_INTEGER = /^(?:0|[1-9]\d*)$/;

/**
 * Validators are compiled on a route's first request, not when the app starts: Ajv compiling
 * every schema of every route took a fifth of a second of each start (every process, every
 * worker, every test app). compileAllValidators() compiles whatever is still pending, so a test
 * can make a broken schema fail as it would have failed the start.
 */
const pending = new Set<() => ValidateFunction>();

export const validatorCompiler: FastifySchemaCompiler<unknown> = (route) => {
  let validate: ValidateFunction | undefined;
  const compile = () => {
    pending.delete(compile);
    return (validate ??= compileValidator(route.schema, route.httpPart));
  };
  pending.add(compile);
  const lazy = ((data: unknown) => {
    const compiled = validate ?? compile();
    const valid = compiled(data);
    lazy.errors = compiled.errors;
    return valid;
  }) as ValidateFunction;
  return lazy;
};

/** Compiles every validator not compiled yet; throws what Ajv throws for a broken schema. */
export function compileAllValidators(): number {
  const compilers = [...pending];
  for (const compile of compilers) compile();
  return compilers.length;
}

function compileValidator(schema: unknown, httpPart: string | undefined): ValidateFunction {
  if (httpPart === 'body') return bodyValidator(schema as object);
  const validate = textAjv.compile(schema as object);
  if (httpPart !== 'params') return validate;
  const integers = Object.entries((schema as { properties?: Record<string, { type?: string }> }).properties ?? {})
    .filter(([, property]) => property.type === 'integer')
    .map(([name]) => name);
  const checkParams = ((data: Record<string, unknown>) => {
    const bad = integers.find((name) => typeof data[name] === 'string' && !CANONICAL_INTEGER.test(data[name] as string));
    if (bad !== undefined) {
      checkParams.errors = [{ instancePath: `/${bad}`, keyword: 'type', params: { type: 'integer' }, schemaPath: '', message: 'must be an integer' }];
      return false;
    }
    const valid = validate(data);
    checkParams.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return checkParams;
}

/**
 * A body is checked for its first violation; only when it has one, and is of ordinary size, is it
 * checked again for all of them (a valid body, the common case, is validated once).
 */
function bodyValidator(schema: object): ValidateFunction {
  const first = firstErrorAjv.compile(schema);
  let every: ValidateFunction | undefined;
  const validate = ((data: unknown) => {
    if (first(data)) {
      validate.errors = null;
      return true;
    }
    if (valuesWithin(data, EVERY_ERROR_UP_TO_VALUES)) {
      every ??= bodyAjv.compile(schema);
      every(data);
      validate.errors = every.errors;
    } else {
      validate.errors = first.errors;
    }
    return false;
  }) as ValidateFunction;
  return validate;
}

/** Whether a parsed body holds at most `limit` values, counted without walking past the limit. */
function valuesWithin(data: unknown, limit: number): boolean {
  let count = 0;
  const pending: unknown[] = [data];
  while (pending.length > 0) {
    const value = pending.pop();
    if (++count > limit) return false;
    if (Array.isArray(value)) {
      if (count + value.length > limit) return false;
      pending.push(...value);
    } else if (typeof value === 'object' && value !== null) {
      const members = Object.values(value);
      if (count + members.length > limit) return false;
      pending.push(...members);
    }
  }
  return true;
}

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
      fieldErrors.length === 1 ? `The body is invalid: ${fieldErrors[0]!.pointer} ${fieldErrors[0]!.detail}.` : `The body has ${allErrors.length} invalid fields${listed}.`,
      fieldErrors,
    );
  }
  const [first] = fieldErrors;
  return new BadRequestError(
    first ? `${where === 'query' ? 'Query parameter' : 'Header'} ${first.pointer.slice(2) || '(all)'} ${first.detail}.` : 'The request is invalid.',
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
  const member = error.keyword === 'required' ? params.missingProperty : error.keyword === 'additionalProperties' ? params.additionalProperty : undefined;
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
  const name = type === 'object' ? 'an object' : type === 'array' ? 'an array' : type === 'integer' ? 'an integer' : `a ${type}`;
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
